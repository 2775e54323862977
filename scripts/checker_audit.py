"""Stage script (rule checker_audit): probe every official predicate; no model is called."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.stage import run_checker_audit

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    if cfg.suite.name == "apex":  # no official predicates to audit; the reason goes in the summary
        from evoaudit.suite.apex.audit_stage import skip_checker_audit

        skip_checker_audit(cfg, Path(snakemake.output.csv), Path(snakemake.output.summary))
    else:
        run_checker_audit(cfg, Path(snakemake.output.csv), Path(snakemake.output.summary))
