"""Stage script (rules freeze_lineage and freeze): one lineage's manifest, or the global one over them."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.seal.stage import freeze_stage

with job_log(snakemake.log[0]):
    freeze_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        [Path(p) for p in snakemake.params.paths],
        Path(snakemake.params.results),
        Path(snakemake.output.manifest),
        lineage=snakemake.wildcards.get("lineage"),
        combine=snakemake.params.combine,
    )
