"""Stage script (rule apex_attacks): build the frozen APEX-Harm attack set with the configured attacker."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.jsonl import read_records
from evoaudit.models.structured import endpoint_transport
from evoaudit.provenance import write_provenance
from evoaudit.records import Rollout
from evoaudit.suite.apex.attacks import ablation
from evoaudit.suite.apex.attacks.attack_set import build_from_config
from evoaudit.suite.apex.attacks.attacker import make_attacker

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    name = ablation.arm_name(snakemake.wildcards.get("arm", ""))
    if name is None:
        attacker = make_attacker(cfg.suite.apex.attacker, endpoint_transport)
        build_from_config(cfg, attacker, Path(snakemake.output.attacks))
    else:
        # An ablated arm (apex.ablations): its own attack set, with what it was built from in provenance.
        out = Path(snakemake.output.attacks)
        benign = [r for p in snakemake.input.get("benign", []) for r in read_records(Path(p), Rollout)]
        attacker = make_attacker(cfg.suite.apex.attacker, endpoint_transport)
        info = ablation.build(cfg, name, attacker, out, benign)
        shards = list(snakemake.input.get("benign", []))
        write_provenance(out, cfg, "apex_ablation_attacks", benign_shards=shards, **info)
