"""Stage script (rule apex_ablation_table): one ablation's table, its arm against the main run."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.report.apex.ablation import write_ablation

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    names = ("base", "ablated", "base_benign", "ablated_benign", "replays", "base_attacks", "attacks")
    inputs = {n: getattr(snakemake.input, n) for n in (*names, "base_judged", "judged")}
    write_ablation(cfg, snakemake.wildcards.ablation, inputs, Path(snakemake.output.csv))
