"""Stage script (rule apex_report): the APEX-Harm tables, figures and pages from the run's shards."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex_judge import read_judged
from evoaudit.joblog import job_log
from evoaudit.jsonl import read_records
from evoaudit.records import Rollout
from evoaudit.report.apex.report import sim_notice, write_report

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    benign = [r for p in snakemake.input.benign for r in read_records(p, Rollout)]
    attacked = [r for p in snakemake.input.attacked for r in read_records(p, Rollout)]
    attacks = Path(snakemake.input.attacks)
    replays = [Path(p) for p in snakemake.input.replays]
    judged = read_judged(Path(p) for p in snakemake.input.judged)
    write_report(cfg, benign, attacked, attacks, Path(snakemake.params.out), sim_notice(cfg), replays, judged)
