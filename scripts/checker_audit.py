"""Stage script (rule checker_audit): the configured suite's audit of its own checkers; no model is called."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.stage import run_checker_audit

with job_log(snakemake.log[0]):
    run_checker_audit(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.output.csv),
        Path(snakemake.output.summary),
    )
