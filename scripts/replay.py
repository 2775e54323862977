"""Stage script (rule replay): recompute every evaluation shard of one lineage independently and report
field by field, one report per shard."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.replay.stage import replay_shards

with job_log(snakemake.log[0]):
    replay_shards(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        # workflow/rules/common.smk lists both in the same (condition, arm, shard) order.
        list(zip(map(Path, snakemake.input.rollouts), map(Path, snakemake.output.reports), strict=True)),
        Path(snakemake.input.endpoint),
        snakemake.params.on_mismatch,
        spec=Path(snakemake.input.spec),
        manifest=Path(snakemake.input.manifest),
        event=Path(snakemake.input.event),
        results_dir=Path(snakemake.params.results),
        defenses=list(snakemake.params.defenses),  # each shard's, in the same order
    )
