"""Stage script (rule apex_judge): one model's episodes (or an ablation arm's), open cases to the judge."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex.judge import judge_stage
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    judge_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.model,
        [Path(p) for p in snakemake.input.shards],
        Path(snakemake.output.decisions),
    )
