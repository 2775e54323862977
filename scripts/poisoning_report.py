"""Stage script (rule poisoning_report): the poisoning extension's tables, figure and page
(docs/poisoning.md)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.report.poisoning import poisoning_report

with job_log(snakemake.log[0]):
    poisoning_report(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        [Path(p) for p in snakemake.input.contamination],
        [Path(p) for p in snakemake.input.replays],
        [Path(p) for p in snakemake.input.persistence],
        Path(snakemake.output.md).parent,
        [Path(p) for p in snakemake.input.screens],
    )
