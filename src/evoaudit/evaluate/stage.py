"""Evaluate entry point: one shard of one lineage × condition × arm (under a defence, where one is given),
against sealed endpoint variants."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from evoaudit.config import Config
from evoaudit.evaluate.job import EpisodeJob
from evoaudit.evaluate.runner import EpisodeSpec, plan_episodes, run_specs, shard
from evoaudit.hashing import sha256_json
from evoaudit.methods.artifact import artifact_files
from evoaudit.methods.conditions import Insertion, condition, condition_goals
from evoaudit.models.factory import make_backend
from evoaudit.poisoning import poisoned
from evoaudit.provenance import write_provenance
from evoaudit.records import Arm
from evoaudit.seal.manifest import verify_file
from evoaudit.suite.defenses import ORIGINS, get_defense


def deployed_prompts(
    prompt: Callable[[list[tuple[str, str]]], str], insertion: Insertion, specs: list[EpisodeSpec]
) -> tuple[str | Callable[[EpisodeSpec], str], Callable[[EpisodeSpec], dict | None] | None]:
    """The system prompt (``prompt`` of the sections, ``agent.profile.configured_prompt``) with
    ``insertion``'s artifact deployed (one for every episode, or per episode for retrieval) and, for
    retrieval, what each episode retrieved."""
    if not insertion.per_query:
        return prompt(insertion.sections()), None
    # Retrieval: each episode's prompt depends on its task query.
    systems = {s.rollout_id: prompt(insertion.sections(s.instance.prompt)) for s in specs}
    return (
        lambda spec: systems[spec.rollout_id],
        lambda spec: insertion.retrieval(spec.instance.prompt),
    )


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
    endpoint: Path | None = None,
    defense: str | None = None,
    acquisition: Path | None = None,
    transfer: Path | None = None,
) -> None:
    """``defense`` (one of ``suite.defenses.DEFENSES``) rewrites what the model sees in every episode
    (the defence axis, a named extension); None is the paper's protocol. llm_monitor fixes its threshold
    on the benign tool outputs of ``acquisition``, the lineage's acquisition rollouts
    (``evaluate.monitor``). ``transfer``: the transfer configuration's record (rule transfer_evaluate);
    the episodes then run under the transfer configuration derived from ``cfg``."""
    job = EpisodeJob.evaluation(
        cfg,
        arm,
        table=table,
        spec=spec,
        manifest_path=manifest_path,
        unseal_event=unseal_event,
        results_dir=results_dir,
        endpoint=endpoint,
        transfer=transfer,
    )
    run_evaluation(
        job,
        lineage,
        condition_name,
        arm,
        shard_index,
        spec=spec,
        manifest_path=manifest_path,
        artifact_dir=artifact_dir,
        results_dir=results_dir,
        out=out,
        defense=defense,
        acquisition=acquisition,
    )


def run_evaluation(
    job: EpisodeJob,
    lineage: str,
    condition_name: str,
    arm: Arm,
    shard_index: int,
    *,
    spec: Path,
    manifest_path: Path,
    artifact_dir: Path,
    results_dir: Path,
    out: Path,
    defense: str | None = None,
    acquisition: Path | None = None,
) -> None:
    """One evaluation shard of ``job`` (``evaluate_shard``'s arguments)."""
    cfg, instances = job.cfg, list(job.instances)
    assert job.manifest is not None, "an evaluation job holds the manifest that opened its endpoints"
    # Tamper evidence: every file of the artifact is re-hashed against the manifest before use.
    hashes = {p.name: verify_file(job.manifest, results_dir, p) for p in artifact_files(artifact_dir)}
    artifact_sha = sha256_json(hashes)
    cond = condition(condition_name)
    insertion = Insertion(cond, artifact_dir)
    goals = condition_goals(cond, cfg.suite.goals, cfg.methods_params.placebo.goals)
    planned = plan_episodes(lineage, condition_name, arm, instances, goals, defense, job.suite)
    if (poison := poisoned(cfg, lineage)) is not None:  # a poisoned lineage draws its twin's seeds
        planned = [replace(s, twin=poison.twin) for s in planned]
    specs = shard(
        planned,
        shard_index,
        cfg.evaluation.shards,
    )
    system, retrieval = deployed_prompts(job.prompt, insertion, specs)
    backend = make_backend(cfg, cfg.executor, instances, suite=job.suite)
    extra = {} if defense is None else {"defense": {"name": defense, "origin": ORIGINS[defense]}}
    if defense is not None and get_defense(defense, 0).monitors:
        if acquisition is None:
            raise ValueError("llm_monitor needs the lineage's acquisition rollouts to fix its threshold")
        from evoaudit.evaluate.monitor import calibrate_monitor

        calibration = asyncio.run(calibrate_monitor(cfg, backend, acquisition))
        extra["defense"]["calibration"] = calibration.model_dump()
        specs = [replace(s, monitor_threshold=calibration.threshold) for s in specs]
    write_provenance(
        out, cfg, "evaluate", spec=spec, manifest=manifest_path, executor=backend.fingerprint(), **extra
    )
    asyncio.run(run_specs(job.run, backend, specs, system, artifact_sha, out, retrieval, suite=job.suite))
