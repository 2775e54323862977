"""Stage script (rule report): every table, figure and page, and report.md, from the records alone."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.report.stage import report_stage

with job_log(snakemake.log[0]):
    report_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        [Path(p) for p in snakemake.input.rollouts],
        [Path(p) for p in snakemake.input.replays],
        Path(snakemake.params.out),
        transfer=[Path(p) for p in snakemake.input.transfer],
        metas=[Path(p) for p in snakemake.input.metas],
        audit_summary=Path(snakemake.input.audit),
        manifest=Path(snakemake.input.manifest),
        spec=Path(snakemake.input.spec),
        defended=[Path(p) for p in snakemake.input.defended],
        rounds=[Path(p) for p in snakemake.input.rounds],
        round_metas=[Path(p) for p in snakemake.input.round_metas],
    )
