"""Stage script (rule instances): the learning table, the sealed endpoint file and the suite spec."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.suite.stage import make_instances

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    if cfg.suite.name == "apex":  # the audit on APEX-Harm workspaces (inputs: built worlds, attack set)
        from evoaudit.suite.apex.audit_stage import make_instances as make_apex_instances

        make_apex_instances(
            cfg,
            Path(snakemake.input.summary),
            Path(snakemake.output.table),
            Path(snakemake.output.spec),
            Path(snakemake.input.apex_spec),
            Path(snakemake.input.apex_attacks),
        )
    else:
        make_instances(
            cfg, Path(snakemake.input.summary), Path(snakemake.output.table), Path(snakemake.output.spec)
        )
