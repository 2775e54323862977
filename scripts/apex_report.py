"""Stage script (rule apex_report): the APEX-Harm tables, figures and pages from the run's shards."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex.judge import read_judged
from evoaudit.joblog import job_log
from evoaudit.jsonl import read_records, read_timing
from evoaudit.records import Rollout
from evoaudit.report.apex.report import write_report
from evoaudit.report.simlabel import apex_sim_notice as sim_notice

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    benign = [r for p in snakemake.input.benign for r in read_records(p, Rollout)]
    attacked = [r for p in snakemake.input.attacked for r in read_records(p, Rollout)]
    attacks = Path(snakemake.input.attacks)
    replays = [Path(p) for p in snakemake.input.replays]
    judged = read_judged(Path(p) for p in snakemake.input.judged)
    # Wall times live beside each shard (its timing file), outside the hashed records.
    shards = [*snakemake.input.benign, *snakemake.input.attacked]
    wall_s = {rid: t["wall_s"] for p in shards for rid, t in read_timing(p).items() if "wall_s" in t}
    out = Path(snakemake.params.out)
    stealth = Path(snakemake.input.stealth)
    write_report(
        cfg,
        benign,
        attacked,
        attacks,
        out,
        sim_notice(cfg),
        replays,
        judged,
        wall_s,
        stealth,
        worlds=Path(cfg.suite.apex.out),  # built by the manifest input: the navigation ranks read them
    )
