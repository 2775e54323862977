"""Stage script (rule write_screen): the write-path screens over one lineage's acquisition record."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.methods.write_screen import write_screen

with job_log(snakemake.log[0]):
    write_screen(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.lineage,
        Path(snakemake.input.rollouts),
        Path(snakemake.input.record),
        Path(snakemake.input.table),
        Path(snakemake.output.rollouts),
        Path(snakemake.output.record),
    )
