"""Stage script (rule contamination): the contamination of one poisoned lineage's frozen artifacts and its
clean twin's (docs/poisoning.md)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.methods.contamination import contamination_report

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    report = contamination_report(cfg, snakemake.wildcards.plineage, Path(snakemake.params.results))
    report.write(snakemake.output.report)
