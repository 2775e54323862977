"""Stage script (rules evolve and evolve_round): one method of one lineage, from that lineage's
acquisition record (a later round: its own, from the previous round's artifact)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.methods.evolve import evolve

with job_log(snakemake.log[0]):
    evolve(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.lineage,
        snakemake.wildcards.method,
        Path(snakemake.input.rollouts),
        Path(snakemake.input.record),
        Path(snakemake.output.meta).parent,
        table=Path(snakemake.input.table),
        # evolve_round only: the previous round's artifact, evolution's starting state.
        prior=Path(snakemake.input.prior).parent if "prior" in snakemake.input.keys() else None,
        results_dir=Path(snakemake.params.results) if hasattr(snakemake.params, "results") else None,
        # write_defenses on (rule write_screen): the screened rollouts and their record.
        screened=(Path(snakemake.input.screened), Path(snakemake.input.screen_record))
        if "screened" in snakemake.input.keys()
        else None,
    )
