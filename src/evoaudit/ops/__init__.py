"""Operations: plan and budget estimation, cluster resources, SLURM end states, progress reporting.

Nothing here changes what an audit computes; it only says what a run will cost and how jobs map onto a
scheduler.
"""
