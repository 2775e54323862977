"""The fifteen professional worlds and tasks, generated without an LLM: their prose, programs and attack
goals, the build-time self-checks, and the built worlds read back from disk (``cache``)."""
