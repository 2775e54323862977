"""Stage script (rule replay_contamination): replay recomputes one contamination report from the frozen
files and compares it field by field (docs/poisoning.md)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.replay.contamination import replay_contamination

with job_log(snakemake.log[0]):
    replay_contamination(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.input.report),
        Path(snakemake.params.results),
        Path(snakemake.output.report),
        snakemake.params.on_mismatch,
    )
