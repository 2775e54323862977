"""Stage script (rule apex_replay): replay one APEX shard and write its mismatch report."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.replay.stage import replay_stage

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    replay_stage(
        cfg,
        Path(snakemake.input.rollouts),
        Path(snakemake.input.table),
        Path(snakemake.output.report),
        snakemake.params.on_mismatch,
        defense=snakemake.params.defense,  # the rule's: None for the main run and an ablated arm
    )
