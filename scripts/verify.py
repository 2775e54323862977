"""Stage script (rule verify): rerun a sample of recorded rollouts and require identical records."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.verify import verify_stage
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    verify_stage(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        [Path(p) for p in snakemake.input.shards],
        table=Path(snakemake.input.table),
        spec=Path(snakemake.input.spec),
        results_dir=Path(snakemake.params.results),
        out=Path(snakemake.output.report),
    )
