"""Stage script (rule apex_manifest): the APEX runs' orchestrator settings (run_manifest.json)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.credentials import public_config
from evoaudit.evaluate.apex.shard import run_manifest
from evoaudit.joblog import job_log
from evoaudit.records import RunManifest

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    body = public_config(run_manifest(cfg, Path(snakemake.input.spec), Path(snakemake.input.attacks)))
    RunManifest.model_validate(body).write(Path(snakemake.output.manifest))
