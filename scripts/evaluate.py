"""Stage script (rules evaluate and transfer_evaluate): one evaluation shard against the endpoint file.

The transfer check runs under its derived configuration, derived again by the job from the run's own
configuration (input ``config`` is its record, with URL credentials redacted); the audit under the run's.
"""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.evaluate.stage import evaluate_shard
from evoaudit.joblog import job_log

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    evaluate_shard(
        cfg,
        snakemake.wildcards.lineage,
        snakemake.wildcards.condition,
        snakemake.params.arm,
        int(snakemake.params.shard),
        table=Path(snakemake.input.table),
        spec=Path(snakemake.input.spec),
        manifest_path=Path(snakemake.input.manifest),
        unseal_event=Path(snakemake.input.event),
        artifact_dir=Path(snakemake.input.meta).parent,
        results_dir=Path(snakemake.params.results),
        out=Path(snakemake.output.rollouts),
        endpoint=Path(snakemake.input.endpoint),
        defense=getattr(snakemake.params, "defense", None),  # rule evaluate_defended only
        # evaluate_defended under llm_monitor only: the benign items its threshold is fixed on
        acquisition=Path(snakemake.input.acquisition) if "acquisition" in snakemake.input.keys() else None,
        # transfer_evaluate only: the record of the transfer configuration, which the job derives again
        transfer=Path(snakemake.input.config) if "config" in snakemake.input.keys() else None,
    )
