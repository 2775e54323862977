"""Stage script (rule replay): recompute one evaluation shard independently and report field by field."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.replay.stage import replay_stage

with job_log(snakemake.log[0]):
    replay_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.input.rollouts),
        Path(snakemake.input.endpoint),
        Path(snakemake.output.report),
        snakemake.params.on_mismatch,
        spec=Path(snakemake.input.spec),
        manifest=Path(snakemake.input.manifest),
        event=Path(snakemake.input.event),
        results_dir=Path(snakemake.params.results),
    )
