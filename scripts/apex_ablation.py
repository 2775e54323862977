"""Stage script (rule apex_ablation_table): one ablation's table, its arm against the main run."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

import json
from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex_judge import read_judged
from evoaudit.hashing import sha256_file
from evoaudit.joblog import job_log
from evoaudit.jsonl import read_records
from evoaudit.provenance import write_provenance
from evoaudit.records import Rollout
from evoaudit.replay.apex import check_judged
from evoaudit.report.apex import scores as sc
from evoaudit.report.apex.ablation import ablation_table, write_table
from evoaudit.report.apex.judged import apply_judged
from evoaudit.report.apex.report import sim_notice
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.suite.apex import ablation

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    name = snakemake.wildcards.ablation
    policy = cfg.apex.failure_policy
    arms = {}
    for arm, shards, judge_files in (
        ("base", snakemake.input.base, snakemake.input.base_judged),
        ("ablated", snakemake.input.ablated, snakemake.input.judged),
    ):
        rollouts = [r for p in shards for r in read_records(p, Rollout)]
        judged = read_judged(Path(p) for p in judge_files)
        # The judge files are checked against the rollouts (without asking again) before they are applied.
        mismatches = check_judged(rollouts, judged)
        if mismatches:
            raise ValueError(
                f"{arm} arm: {len(mismatches)} judge decisions do not match the rollouts, e.g. "
                f"{next(iter(mismatches))}; rerun the apex_judge rule for this arm"
            )
        arms[arm] = sc.scored(apply_judged(rollouts, judged), policy)
    base, ablated = arms["base"], arms["ablated"]
    bs = cfg.report.bootstrap
    families = sorted({r.family for r in base + ablated})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    frame = ablation_table(
        base,
        ablated,
        sc.load_attacks(snakemake.input.base_attacks),
        sc.load_attacks(snakemake.input.attacks),
        boot,
    )
    reps = [json.loads(Path(p).read_text()) for p in snakemake.input.replays]
    mismatched = [m if isinstance(m, int) else len(m) for m in (r["mismatched_rollouts"] for r in reps)]
    sets = {
        "base_attack_set_sha256": sha256_file(Path(snakemake.input.base_attacks)),
        "ablated_attack_set_sha256": sha256_file(Path(snakemake.input.attacks)),
        # The ablated arm's replay (the base arm's is in the main report's apex_replay table).
        "ablated_replay": {
            "replayed": sum(r["replayed"] for r in reps),
            "mismatched_rollouts": sum(mismatched),
        },
    }
    out = Path(snakemake.output.csv)
    write_table(name, ablation.ablation(cfg, name).attacks, frame, out, sim_notice(cfg), sets)
    write_provenance(
        [out, out.with_suffix(".parquet"), out.with_suffix(".html")], cfg, "apex_ablation_table", **sets
    )
