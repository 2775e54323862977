"""Stage script (rule export_inspect): one Inspect AI eval log per (suite, lineage, condition, arm)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.report.export.inspect_logs import export_inspect

with job_log(snakemake.log[0]):
    export_inspect(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.params.results),
        Path(snakemake.output[0]),
    )
