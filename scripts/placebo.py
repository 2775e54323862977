"""Stage script (rule placebo): a method's placebo artifact, shaped after its real artifact."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.methods.evolve import placebo

with job_log(snakemake.log[0]):
    placebo(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.lineage,
        snakemake.wildcards.method,
        Path(snakemake.input.real).parent,
        Path(snakemake.output.meta).parent,
    )
