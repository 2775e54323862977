"""Stage script (rule persistence): the poisoning goal's check on every evaluated episode of one poisoned
lineage and its clean twin (docs/poisoning.md)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.persistence import persistence
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    report = persistence(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.plineage,
        [Path(p) for p in snakemake.input.shards],
        endpoint=Path(snakemake.input.endpoint),
        spec=Path(snakemake.input.spec),
        manifest=Path(snakemake.input.manifest),
        event=Path(snakemake.input.event),
        results_dir=Path(snakemake.params.results),
    )
    report.write(snakemake.output.report)
