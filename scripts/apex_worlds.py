"""Stage script (rule apex_worlds): build the APEX-Harm worlds and write their manifest and spec."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.apex.stage import build_worlds

with job_log(snakemake.log[0]):
    build_worlds(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.output.manifest),
        Path(snakemake.output.spec),
    )
