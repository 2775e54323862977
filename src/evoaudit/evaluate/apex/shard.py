"""APEX-Harm runs in the workflow: one shard of one model's benign or attacked episodes.

The episodes go through the same runner as the Banking audit (``runner.run_specs``: bounded concurrency,
the shard writer, resume keys, the excluded-share check); only what is planned differs. Each repeat is its
own "lineage" (``r0``, ``r1``...), so every repeat has its own derived seed for the same model × instance,
and the model id takes the place of the condition in rollout ids.

APEX has no evolved artifact: the runner's ``artifact_sha256`` is the hash of what the episodes run
against (the worlds' spec and the frozen attack set), so a rebuilt world or attack set invalidates
recorded rollouts on resume instead of mixing them in.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit.agent.prompt import system_prompt
from evoaudit.config import Config, SuiteView, apex_arm_config, apex_model_config, suite_view
from evoaudit.evaluate.runner import EpisodeSpec, plan_episodes, run_specs, shard
from evoaudit.hashing import sha256_file, sha256_json
from evoaudit.models.factory import make_backend
from evoaudit.provenance import write_provenance
from evoaudit.records import Arm, Instance
from evoaudit.suite.defenses import NEEDS_ACQUISITION, ORIGINS
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite

APEX = "apex"


def repeat_lineages(cfg: Config) -> list[str]:
    return [f"r{k}" for k in range(cfg.apex.repeats)]


def endpoint_instances(cfg: Config, attack_set: Path | None = None) -> list[Instance]:
    """The endpoint variant's instances (one per task): what APEX-Harm runs and attacks. ``attack_set``
    points them at another frozen attack set of the same worlds (an ablated arm, ``apex.ablations``)."""
    return _endpoint_instances(get_suite(APEX), suite_view(cfg), attack_set)


def _endpoint_instances(suite: AuditSuite, view: SuiteView, attack_set: Path | None) -> list[Instance]:
    out = [i for i in suite.build_instances(view) if i.role == "endpoint"]
    if attack_set is None:
        return out
    # What an instance's environment holds is the suite's to read and rewrite.
    return [suite.with_attack_set(i, attack_set) for i in out]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ApexShardJob:
    """What one APEX-Harm shard job derives from its configuration, built once by its stage entry point
    (``ApexShardJob.of``); the layers below take what they need from it instead of deriving it again."""

    cfg: Config
    """The workflow's configuration (the job's shard count, ``apex.shards``)."""

    model_id: str
    """The model whose episodes the job runs (``apex.models[].id``); it stands in the condition's place in
    rollout ids."""

    run_cfg: Config
    """The configuration the episodes run under: the model's executor and simulator overrides over the
    arm's orchestrator settings (``apex_model_config(apex_arm_config(cfg, ablation), model_id)``)."""

    suite: AuditSuite
    """APEX-Harm's suite object (``registry.get_suite``)."""

    instances: tuple[Instance, ...]
    """The endpoint instances (one per task), pointed at the arm's frozen attack set."""

    @classmethod
    def of(
        cls, cfg: Config, model_id: str, attacks_path: Path | None, ablation: str | None = None
    ) -> ApexShardJob:
        """``ablation``: the arm's ablation (``apex.ablations``); None: the main run."""
        run_cfg = apex_model_config(apex_arm_config(cfg, ablation), model_id)
        suite = get_suite(APEX)
        instances = _endpoint_instances(suite, suite_view(run_cfg), attacks_path)
        return cls(cfg, model_id, run_cfg, suite, tuple(instances))


def plan_apex(
    job: ApexShardJob, arm: Arm, category: str | None, defense: str | None = None
) -> list[EpisodeSpec]:
    """Every repeat's episodes of the job's model: the benign run of each task, or each attack of
    ``category``; under ``defense`` (the defence axis, ``suite.defenses``) when one is given; a defence the
    suite lists as unsupported (``AuditSuite.unsupported_defenses``) is refused, whoever asks for it."""
    refused = job.suite.unsupported_defenses
    if defense in refused:
        raise ValueError(f"defense {defense!r} does not run on APEX-Harm: {refused[defense]}")
    if defense in NEEDS_ACQUISITION:
        why = NEEDS_ACQUISITION[defense]
        raise ValueError(f"defense {defense!r} does not run in APEX-Harm's own runs: {why}")
    goals = [category] if category else []
    specs: list[EpisodeSpec] = []
    for lineage in repeat_lineages(job.run_cfg):
        specs.extend(plan_episodes(lineage, job.model_id, arm, list(job.instances), goals, defense))
    return sorted(specs, key=lambda s: s.rollout_id)


def run_pin(spec_path: Path, attacks_path: Path) -> str:
    return sha256_json({"worlds_spec": sha256_file(spec_path), "attack_set": sha256_file(attacks_path)})


def evaluate_apex_shard(
    cfg: Config,
    model_id: str,
    arm: Arm,
    category: str | None,
    shard_index: int,
    *,
    spec_path: Path,
    attacks_path: Path,
    out: Path,
    defense: str | None = None,
    ablation: str | None = None,
) -> None:
    """``ablation``: the arm's ablation (``apex.ablations``), whose orchestrator settings the episodes run
    under; None: the main run."""
    job = ApexShardJob.of(cfg, model_id, attacks_path, ablation)
    run_cfg = job.run_cfg
    specs = shard(plan_apex(job, arm, category, defense), shard_index, job.cfg.apex.shards)
    backend = make_backend(run_cfg, run_cfg.executor, list(job.instances))
    pin = run_pin(spec_path, attacks_path)
    write_provenance(
        out,
        run_cfg,
        "apex_evaluate",
        executor=backend.fingerprint(),
        spec=spec_path,
        apex_run_sha256=pin,
        sandbox=job.suite.sandbox_info(run_cfg.suite),  # type: ignore[attr-defined]
        **({} if defense is None else {"defense": {"name": defense, "origin": ORIGINS[defense]}}),
    )
    system = system_prompt(run_cfg.agent.system_prompt)
    asyncio.run(run_specs(run_cfg, backend, specs, system, pin, out))


def sandbox_info(cfg: Config) -> dict[str, Any]:
    """Which sandbox runs the workspace programs (kind, version, flags, isolation strong/weak/none), as the
    APEX suite reports it; recorded beside every shard's rollouts and in the run manifest."""
    return get_suite(APEX).sandbox_info(cfg.suite)  # type: ignore[attr-defined]


def run_manifest(cfg: Config, spec_path: Path, attacks_path: Path) -> dict[str, Any]:
    """The orchestrator settings of the APEX runs (the paper's H.1 list), per model, with what they pin."""
    models = []
    for m in cfg.apex.models:
        ep = m.executor
        models.append(
            {
                "id": m.id,
                "backend": ep.backend,
                "model": ep.model,
                "base_url": ep.base_url,
                "max_tokens_per_response": ep.max_tokens,
                "temperature": ep.temperature,
                "streaming": False,  # one non-streaming request per step
                "concurrency": ep.concurrency,
                "max_retries": ep.max_retries,
                "request_timeout_s": ep.timeout_s,
                "sim_overrides": m.sim,
            }
        )
    return {
        "suite": APEX,
        "step_limit": cfg.apex.step_limit,
        # The wall-clock limit per episode in seconds (apex.episode_timer_s); null: none, only the step
        # limit and each request's own timeout end an episode.
        "episode_timer": cfg.apex.episode_timer_s,
        "repeats": cfg.apex.repeats,
        "seed_derivation": "derive_seed(seed, r<repeat>, instance_id, attack_id, 'executor')",
        "seed": cfg.seed,
        "categories": list(cfg.apex.categories),
        "shards": cfg.apex.shards,
        "failure_handling": {
            "infra_failure_policy": cfg.apex.failure_policy,
            "max_excluded_share": cfg.evaluation.max_excluded_share,
            "retries": "per request, executor.max_retries with backoff; then the episode is an "
            "infrastructure failure and a rerun redoes only it",
        },
        "system_prompt": cfg.apex.system_prompt,
        "judge": {"backend": cfg.apex.judge.backend, "model": cfg.apex.judge.model},
        "worlds_spec_sha256": json.loads(spec_path.read_text()).get("sha256"),
        "attack_set_sha256": sha256_file(attacks_path),
        "run_sha256": run_pin(spec_path, attacks_path),
        "models": models,
        "sandbox": sandbox_info(cfg),
    }


def api_slots(cfg: Config, model_id: str) -> int:
    """Slots one of this model's jobs claims (as ``ops.resources.api_slots``): its concurrency when it
    calls a real endpoint, 0 on the simulator."""
    ep = cfg.apex.model(model_id).executor
    return ep.concurrency if ep.backend != "sim" else 0
