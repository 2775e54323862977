"""Stage script (rules unseal and unseal_lineage): record the event that opens the endpoint variants."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.seal.stage import unseal_stage

with job_log(snakemake.log[0]):
    unseal_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.input.manifest),
        Path(snakemake.params.results),
        Path(snakemake.output.event),
        lineage=snakemake.wildcards.get("lineage"),
    )
