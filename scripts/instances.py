"""Stage script (rule instances): the learning table, the sealed endpoint file and the suite spec."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.stage import make_instances

with job_log(snakemake.log[0]):
    make_instances(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        Path(snakemake.input.summary),
        Path(snakemake.output.table),
        Path(snakemake.output.spec),
        # The suite's further inputs (suite.registry.stage_inputs), by the names the rule gives them.
        {name: Path(path) for name, path in snakemake.input.items() if name != "summary"},
    )
