"""Stage script (rule transfer_config): the configuration of the cross-executor transfer check."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.transfer_config import write_transfer_config

with job_log(snakemake.log[0]):
    write_transfer_config(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.output.config),
    )
