"""Stage script (rule checker_audit_table): the checker-audit table over extra_suites.checker_audit."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.joblog import job_log
from evoaudit.report.checker_audit_table import build_table

with job_log(snakemake.log[0]):
    suites = snakemake.params.suites
    build_table(
        {s: (Path(snakemake.input[f"{s}_csv"]), Path(snakemake.input[f"{s}_summary"])) for s in suites},
        Path(snakemake.output.csv),
        Path(snakemake.output.md),
    )
