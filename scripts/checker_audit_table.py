"""Stage script (rule checker_audit_table): the checker-audit table over extra_suites.checker_audit."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.provenance import write_provenance
from evoaudit.report.checker_audit_table import build_table

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    suites = snakemake.params.suites
    outputs = [Path(snakemake.output.csv), Path(snakemake.output.md)]
    build_table(
        {s: (Path(snakemake.input[f"{s}_csv"]), Path(snakemake.input[f"{s}_summary"])) for s in suites},
        *outputs,
    )
    write_provenance(outputs, cfg, "checker_audit_table", suites=list(suites))
