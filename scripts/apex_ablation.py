"""Stage script (rule apex_ablation_table): one ablation's table, its arm against the main run."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.hashing import sha256_file
from evoaudit.joblog import job_log
from evoaudit.jsonl import read_timing
from evoaudit.provenance import write_provenance
from evoaudit.report.apex import scores as sc
from evoaudit.report.apex.ablation import ablation_table, orchestrator_table, write_table
from evoaudit.report.apex.judged import judged_rollouts, replay_totals
from evoaudit.report.simlabel import apex_sim_notice as sim_notice
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.suite.apex import ablation

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    name = snakemake.wildcards.ablation
    policy = cfg.apex.failure_policy
    arms = {
        arm: judged_rollouts(shards, judge_files, policy, f"{arm} arm")
        for arm, shards, judge_files in (
            ("base", snakemake.input.base, snakemake.input.base_judged),
            ("ablated", snakemake.input.ablated, snakemake.input.judged),
        )
    }
    base, ablated = arms["base"], arms["ablated"]
    spec = ablation.ablation(cfg, name)
    if spec.orchestrator:
        # The benign shards of both arms (the task score), judged by the same judge files.
        for arm, shards, judge_files in (
            ("base", snakemake.input.base_benign, snakemake.input.base_judged),
            ("ablated", snakemake.input.ablated_benign, snakemake.input.judged),
        ):
            arms[f"{arm}_benign"] = judged_rollouts(shards, judge_files, policy, f"{arm} arm (benign)")
    bs = cfg.report.bootstrap
    families = sorted({r.family for rs in arms.values() for r in rs})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    if spec.orchestrator:
        # Wall times live beside each shard (its timing file), outside the hashed records.
        # Both arms hold the same rollout ids: one lookup per arm.
        wall_s = {
            arm: {rid: t["wall_s"] for p in shards for rid, t in read_timing(p).items() if "wall_s" in t}
            for arm, shards in (
                ("base", [*snakemake.input.base, *snakemake.input.base_benign]),
                ("ablated", [*snakemake.input.ablated, *snakemake.input.ablated_benign]),
            )
        }
        settings = {
            "base": {k: getattr(cfg.apex, k) for k in spec.orchestrator},
            "ablated": dict(spec.orchestrator),
        }
        frame = orchestrator_table(
            (arms["base_benign"], base), (arms["ablated_benign"], ablated), settings, wall_s, boot
        )
    else:
        frame = ablation_table(
            base,
            ablated,
            sc.load_attacks(snakemake.input.base_attacks),
            sc.load_attacks(snakemake.input.attacks),
            boot,
        )
    sets = {
        "base_attack_set_sha256": sha256_file(Path(snakemake.input.base_attacks)),
        "ablated_attack_set_sha256": sha256_file(Path(snakemake.input.attacks)),
        # The ablated arm's replay (the base arm's is in the main report's apex_replay table).
        "ablated_replay": replay_totals(snakemake.input.replays),
    }
    out = Path(snakemake.output.csv)
    write_table(name, spec.attacks, frame, out, sim_notice(cfg), sets, spec.orchestrator)
    write_provenance(
        [out, out.with_suffix(".parquet"), out.with_suffix(".html")], cfg, "apex_ablation_table", **sets
    )
