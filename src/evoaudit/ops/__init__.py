"""Operations: plan and budget estimation, cluster resources, progress reporting.

Nothing here changes what an audit computes; it only says what a run will cost and how jobs map onto a
scheduler.
"""
