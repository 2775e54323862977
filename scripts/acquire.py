"""Stage script (rules acquire and acquire_round): the unevolved executor on one lineage's acquisition
variants, or, in a later round, the executor with the previous round's artifact deployed."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.acquire import acquire
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    acquire(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.lineage,
        Path(snakemake.input.table),
        Path(snakemake.input.spec),
        Path(snakemake.output.rollouts),
        Path(snakemake.output.record),
        # acquire_round only: the previous round's artifact, deployed.
        prior=Path(snakemake.input.prior).parent if "prior" in snakemake.input.keys() else None,
        round_index=int(getattr(snakemake.params, "round", 1)),
    )
