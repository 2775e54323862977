"""Stage script (rule apex_instances): the APEX endpoint instances as a table, for the replay."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex.shard import endpoint_instances
from evoaudit.joblog import job_log
from evoaudit.suite.instances import write_instances

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    # An ablated arm's table (arm 'ablations/<name>/') points its instances at that arm's attack set.
    ablated = bool(snakemake.wildcards.get("arm", ""))
    attack_set = Path(snakemake.input.attacks) if ablated else None
    write_instances(endpoint_instances(cfg, attack_set), snakemake.output.table)
