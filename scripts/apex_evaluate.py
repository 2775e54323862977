"""Stage script (rules apex_benign and apex_attacked, and their defended twins): one shard of one model's
APEX-Harm episodes."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.apex.shard import evaluate_apex_shard
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    category = snakemake.params.category
    evaluate_apex_shard(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        snakemake.wildcards.model,
        "attacked" if category else "benign",
        category,
        int(snakemake.wildcards.shard),
        spec_path=Path(snakemake.input.spec),
        attacks_path=Path(snakemake.input.attacks),
        out=Path(snakemake.output.rollouts),
        defense=getattr(snakemake.params, "defense", None),  # the *_defended rules only
        ablation=getattr(snakemake.params, "ablation", None),  # an ablated arm's runs only
    )
