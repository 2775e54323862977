"""Stage script (rule apex_probes): the APEX build-time probes, written to results/suite/apex_probes.csv."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.models.structured import endpoint_transport
from evoaudit.suite.apex.attacks.attacker import make_attacker
from evoaudit.suite.apex.attacks.probes import probes_from_config

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    attack_set = getattr(snakemake.input, "attacks", None)  # the frozen set, when a rule provides it
    probes_from_config(
        cfg,
        Path(snakemake.output.csv).parent,
        attacker=None if attack_set else make_attacker(cfg.suite.apex.attacker, endpoint_transport),
        attack_set=attack_set,
    )
