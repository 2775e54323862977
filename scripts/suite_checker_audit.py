"""Stage script (rule suite_checker_audit): a further suite's own checker audit; no model is called."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.registry import get_checker_audit

with job_log(snakemake.log[0]):
    get_checker_audit(snakemake.wildcards.xsuite).checker_audit(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.output.csv),
        Path(snakemake.output.summary),
    )
