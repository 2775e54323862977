"""Stage script (rule evolve): one method of one lineage, from that lineage's acquisition record."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.methods.evolve import evolve

with job_log(snakemake.log[0]):
    evolve(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.lineage,
        snakemake.wildcards.method,
        Path(snakemake.input.rollouts),
        Path(snakemake.input.record),
        Path(snakemake.output.meta).parent,
        table=Path(snakemake.input.table),
    )
