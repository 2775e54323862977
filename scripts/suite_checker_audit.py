"""Stage script (rule suite_checker_audit): a further suite's own checker audit; no model is called."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.provenance import write_provenance
from evoaudit.suite.registry import get_checker_audit

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    audit = get_checker_audit(snakemake.wildcards.xsuite)
    outputs = [Path(snakemake.output.csv), Path(snakemake.output.summary)]
    audit.checker_audit(cfg.suite, *outputs)
    write_provenance(
        outputs, cfg, "suite_checker_audit", suite=audit.name, benchmark_version=audit.benchmark_version
    )
