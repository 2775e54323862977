"""Evaluate entry point: one shard of one lineage × condition × arm, against sealed endpoint variants."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from evoaudit.agent.prompt import system_prompt
from evoaudit.config import Config
from evoaudit.evaluate.runner import plan_episodes, run_specs, shard
from evoaudit.hashing import sha256_json
from evoaudit.methods.artifact import artifact_files
from evoaudit.methods.conditions import condition, prompt_sections
from evoaudit.models.factory import make_backend
from evoaudit.records import Arm
from evoaudit.seal.freeze import read_manifest
from evoaudit.seal.guard import load_instances
from evoaudit.seal.manifest import SealError, verify_file
from evoaudit.suite.stage import verify_table


def evaluate_shard(
    cfg: Config,
    lineage: str,
    condition_name: str,
    arm: Arm,
    shard_index: int,
    *,
    table: Path,
    spec: Path,
    manifest_path: Path,
    unseal_event: Path,
    artifact_dir: Path,
    results_dir: Path,
    out: Path,
) -> None:
    verify_table(table, spec)
    manifest = read_manifest(manifest_path)
    event = json.loads(unseal_event.read_text())
    if event["manifest_root"] != manifest.root:
        raise SealError(
            f"unseal event {unseal_event} is for manifest root {event['manifest_root']}, "
            f"not the current {manifest.root}; rerun unseal"
        )
    variants = cfg.roles.benign_endpoint if arm == "benign" else cfg.roles.attacked_endpoint
    instances = load_instances(table, variants, cfg.roles.endpoint_variants, manifest, results_dir)
    # Tamper evidence: every file of the artifact is re-hashed against the manifest before use.
    hashes = {p.name: verify_file(manifest, results_dir, p) for p in artifact_files(artifact_dir)}
    artifact_sha = sha256_json(hashes)
    cond = condition(condition_name)
    system = system_prompt(cfg.agent.system_prompt, prompt_sections(cond, artifact_dir))
    goals = list(cfg.suite.goals)
    specs = shard(
        plan_episodes(lineage, condition_name, arm, instances, goals), shard_index, cfg.evaluation.shards
    )
    backend = make_backend(cfg, cfg.executor, instances)
    asyncio.run(run_specs(cfg, backend, specs, system, artifact_sha, out))
