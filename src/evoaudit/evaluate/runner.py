"""Run a set of episodes with bounded concurrency, appending each rollout as soon as it ends.

An episode that raises an unexpected exception (a bug in the harness: suite, tools, outcome, or a rollout
that cannot be serialised) is recorded as that episode's infrastructure failure ``harness_error``, with its
traceback in the job log, and the shard goes on. Deliberate errors that name their fix (``AuditError``:
configuration, seal, integrity) and cancellation (KeyboardInterrupt, CancelledError) still end the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evoaudit.agent.loop import run_instance
from evoaudit.config import AgentConfig, Config, SuiteConfig, stage_digest
from evoaudit.errors import AuditError
from evoaudit.evaluate import resume
from evoaudit.evaluate.outcome import compute_outcome, harness_failure_outcome
from evoaudit.hashing import sha256_json
from evoaudit.jsonl import ShardWriter, partial_path
from evoaudit.models.base import ChatBackend
from evoaudit.records import Arm, Instance, Rollout
from evoaudit.seeds import derive_seed
from evoaudit.suite.defenses import get_defense
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite

log = logging.getLogger(__name__)


class ExcludedShareError(AuditError):
    """Too many rollouts of a shard ended in infrastructure failures for its results to stand."""


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode: who runs it (lineage, condition, arm, defence), on what (instance, goal), and, once
    ``bind`` has computed them for the run (``run_specs``), its seed and resume key."""

    lineage: str
    condition: str
    arm: Arm
    instance: Instance
    goal: str | None
    # The defence the episode runs under (suite.defenses); None: undefended, the paper's protocol. Not in
    # the rollout id: a defended run has its own shard files, and the same seed as its undefended twin.
    defense: str | None = None
    # The poisoning extension (docs/poisoning.md): a poisoned lineage's clean twin, whose seeds it draws
    # (None: its own lineage's); and whether ``goal`` was placed by poisoning an acquisition episode, which
    # then keeps the seed of the benign episode it replaces.
    twin: str | None = None
    poisoned: bool = False
    # llm_monitor's threshold, fixed on benign items for the shard (``evaluate.monitor``); None otherwise.
    monitor_threshold: int | None = None
    # The executor's episode seed (``episode_seed``); None on a spec only planned, not yet bound.
    seed: int | None = None
    # The resume key its rollout records (``evaluate.resume``); None until bound, or for a lone episode.
    resume_key: str | None = None

    @property
    def rollout_id(self) -> str:
        return f"{self.lineage}/{self.condition}/{self.arm}/{self.instance.instance_id}/{self.goal or 'none'}"


@dataclass(frozen=True)
class RunSettings:
    """What running a shard's episodes reads of the configuration, read once (``RunSettings.of``)."""

    # The global seed every episode seed derives from.
    seed: int
    # The hash of the configuration an episode depends on (``config.stage_digest(cfg, 'episode')``).
    sections_sha256: str
    # Episodes running at once (``executor.concurrency``).
    concurrency: int
    # Whether the episode seed is sent with each request (``executor.send_seed``).
    send_seed: bool
    # ``agent.max_steps`` and ``agent.time_limit_s``: where an episode stops.
    max_steps: int
    time_limit_s: float | None
    # The agent profile fields a rollout records (none for the default profile: records.Rollout).
    profile_fields: dict[str, Any]
    # ``evaluation.max_excluded_share``: the share of infrastructure failures a published shard may hold.
    max_excluded_share: float
    # The ``suite`` section, for what the suite reads of it through its door (``AuditSuite.injections``,
    # ``open_tools``).
    suite_cfg: SuiteConfig
    # The ``agent`` section, for the agent loop: its runner profile (``agent.profile``) and your own agent
    # in its place (``agent.external``).
    agent: AgentConfig

    @classmethod
    def of(cls, cfg: Config) -> RunSettings:
        return cls(
            seed=cfg.seed,
            sections_sha256=stage_digest(cfg, "episode"),
            concurrency=cfg.executor.concurrency,
            send_seed=cfg.executor.send_seed,
            max_steps=cfg.agent.max_steps,
            time_limit_s=cfg.agent.time_limit_s,
            profile_fields=_profile_fields(cfg),
            max_excluded_share=cfg.evaluation.max_excluded_share,
            suite_cfg=cfg.suite,
            agent=cfg.agent,
        )


def plan_episodes(
    lineage: str,
    condition: str,
    arm: Arm,
    instances: list[Instance],
    goals: list[str],
    defense: str | None = None,
    suite: AuditSuite | None = None,
) -> list[EpisodeSpec]:
    """Benign: one episode per instance. Attacked: one per instance and each of ``goals`` (the arm's
    configured attacks) that the instance's suite runs against it (``AuditSuite.attacks``; ``suite``: the
    instances' suite object when the caller holds it, else each instance's is resolved)."""
    specs = []
    for inst in instances:
        if arm == "benign":
            specs.append(EpisodeSpec(lineage, condition, arm, inst, None, defense))
        else:
            attacks = (suite if suite is not None else get_suite(inst.suite)).attacks(goals, inst)
            specs.extend(EpisodeSpec(lineage, condition, arm, inst, g, defense) for g in attacks)
    return sorted(specs, key=lambda s: s.rollout_id)


def shard(specs: list[EpisodeSpec], index: int, count: int) -> list[EpisodeSpec]:
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} outside 0..{count - 1}")
    return [s for i, s in enumerate(specs) if i % count == index]


def episode_seed(cfg: Config, spec: EpisodeSpec) -> int:
    return _seed(cfg.seed, spec)


def _seed(global_seed: int, spec: EpisodeSpec) -> int:
    # No condition in the seed: conditions share draws (common random numbers); nor, for a poisoned
    # lineage, the poison (its twin's draws: docs/poisoning.md).
    lineage = spec.twin or spec.lineage
    goal = None if spec.poisoned else spec.goal
    return derive_seed(global_seed, lineage, spec.instance.instance_id, goal, "executor")


def bind(
    run: RunSettings, spec: EpisodeSpec, executor: dict | None = None, artifact_sha256: str | None = None
) -> EpisodeSpec:
    """``spec`` with its seed, and with its resume key when ``executor`` (the backend's fingerprint) is
    given: computed here, once per episode."""
    seed = _seed(run.seed, spec)
    if executor is None:
        return replace(spec, seed=seed)
    key = _resume_key(run.sections_sha256, _defense_key(spec), seed, executor, artifact_sha256)
    return replace(spec, seed=seed, resume_key=key)


def _defense_key(spec: EpisodeSpec) -> str | None:
    """The defence as the resume key reads it: with llm_monitor's threshold, which a changed calibration
    moves."""
    if spec.monitor_threshold is None:
        return spec.defense
    return f"{spec.defense}@{spec.monitor_threshold}"


def _resume_key(
    sections_sha256: str, defense: str | None, seed: int, executor: dict, artifact_sha256: str | None
) -> str:
    sections = sections_sha256
    if defense is not None:  # a defended episode is never kept for its undefended twin, or another's
        sections = sha256_json([sections, defense])
    return resume.resume_key(artifact_sha256, executor, seed, sections)


def spec_resume_key(
    cfg: Config,
    executor: dict,
    spec: EpisodeSpec,
    artifact_sha256: str | None,
    sections_sha256: str | None = None,
) -> str:
    """The resume key ``bind`` gives ``spec`` under ``cfg``."""
    sections = sections_sha256 or stage_digest(cfg, "episode")
    return _resume_key(sections, _defense_key(spec), episode_seed(cfg, spec), executor, artifact_sha256)


async def run_one(
    cfg: Config,
    backend: ChatBackend,
    spec: EpisodeSpec,
    system: str,
    artifact_sha256: str | None,
) -> Rollout:
    """One episode under ``cfg`` (``run_episode`` with the settings read from it)."""
    return await run_episode(RunSettings.of(cfg), backend, spec, system, artifact_sha256)


async def run_episode(
    run: RunSettings,
    backend: ChatBackend,
    spec: EpisodeSpec,
    system: str,
    artifact_sha256: str | None,
    suite: AuditSuite | None = None,
) -> Rollout:
    """One episode; its rollout records ``spec``'s seed and resume key (an unbound spec is bound here,
    without a resume key). ``suite``: the instance's suite object when the caller holds it (a job's),
    else resolved here."""
    if spec.seed is None:
        spec = bind(run, spec)
    inst = spec.instance
    suite = suite if suite is not None else get_suite(inst.suite)
    injections = suite.injections(run.suite_cfg, inst, spec.goal)
    if not run.agent.external.command:
        run_agent = run_instance
    else:  # your own agent over MCP (agent.external)
        from evoaudit.evaluate.served.external import run_external as run_agent
    pre, env, episode = await run_agent(
        backend,
        system,
        inst,
        suite,
        spec.goal,
        injections,
        run.suite_cfg,
        agent=run.agent,
        max_steps=run.max_steps,
        seed=spec.seed if run.send_seed else None,
        defense=get_defense(spec.defense, spec.seed, spec.monitor_threshold),
        time_limit_s=run.time_limit_s,
    )
    outcome = compute_outcome(suite, inst, spec.goal, injections, pre, env, episode)
    return Rollout(
        **_identity(spec, backend, artifact_sha256),
        injections=injections,
        pre_state_sha256=suite.state_sha256(pre),
        messages=episode.messages,
        calls=episode.calls,
        final_output=episode.final_output,
        terminal_state=suite.state(env),
        outcome=outcome,
        usage=episode.usage,
        wall_s=round(episode.wall_s, 6),
        **run.profile_fields,
    )


def _profile_fields(cfg: Config) -> dict[str, Any]:
    """The rollout's ``agent_profile`` and ``max_steps`` (none for the default profile: records.Rollout)."""
    if cfg.agent.profile == "default":
        return {}
    return {"agent_profile": cfg.agent.profile, "max_steps": cfg.agent.max_steps}


def _identity(spec: EpisodeSpec, backend: ChatBackend, artifact_sha256: str | None) -> dict:
    """The fields a rollout's record takes from its (bound) episode spec, whether the episode ended or
    failed."""
    inst = spec.instance
    return {
        "rollout_id": spec.rollout_id,
        "lineage": spec.lineage,
        "condition": spec.condition,
        "arm": spec.arm,
        "instance_id": inst.instance_id,
        "family": inst.family,
        "variant": inst.variant,
        "split": inst.split,
        "goal": spec.goal,
        "seed": spec.seed,
        "executor": backend.fingerprint(),
        "artifact_sha256": artifact_sha256,
        "resume_key": spec.resume_key,
        "defense": spec.defense,
        "monitor_threshold": spec.monitor_threshold,
    }


def harness_failure_rollout(
    backend: ChatBackend,
    run: RunSettings,
    spec: EpisodeSpec,
    artifact_sha256: str | None,
    exc: BaseException,
) -> Rollout:
    """The record of an episode the harness failed: its identity, no messages, calls or states (the episode
    did not end), and the exception as a ``harness_error`` outcome."""
    return Rollout(
        **_identity(spec, backend, artifact_sha256),
        pre_state_sha256="",
        messages=[],
        calls=[],
        terminal_state={},
        outcome=harness_failure_outcome(spec.goal, exc),
        **run.profile_fields,
    )


class Progress:
    def __init__(self, total: int, already: int, label: str, every_s: float = 5.0) -> None:
        self.total, self.done, self.failures = total, already, 0
        self.label, self.every_s = label, every_s
        self.start = self.last = time.monotonic()
        self.started_with = already

    def tick(self, rollout: Rollout) -> None:
        self.done += 1
        self.failures += rollout.outcome.infra_failure is not None
        now = time.monotonic()
        if now - self.last >= self.every_s or self.done == self.total:
            self.last = now
            fresh = self.done - self.started_with
            rate = fresh / max(now - self.start, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            log.info(
                "%s: %d/%d rollouts, %.1f/s, ETA %.0fs, infrastructure failures %d",
                self.label,
                self.done,
                self.total,
                rate,
                eta,
                self.failures,
            )


async def run_specs(
    settings: RunSettings | Config,
    backend: ChatBackend,
    specs: list[EpisodeSpec],
    system: str | Callable[[EpisodeSpec], str],
    artifact_sha256: str | None,
    out_path: str | Path,
    retrieval: Callable[[EpisodeSpec], dict | None] | None = None,
    *,
    suite: AuditSuite | None = None,
) -> list[Rollout]:
    """Run every spec not already in the shard's partial record, then publish the shard.

    ``settings``: the job's ``RunSettings`` (a ``Config`` is read into them here). ``system`` is one system
    prompt for every episode, or a function of the episode (retrieval); ``retrieval`` gives what was
    retrieved for an episode, recorded with its rollout. ``suite``: the suite object every spec's instance
    comes from, when the job holds it (else each episode resolves its instance's)."""
    run = settings if isinstance(settings, RunSettings) else RunSettings.of(settings)
    # Resume keys are computed before any request: the executor's identity is what its config fixes.
    executor = backend.fingerprint()
    specs = [bind(run, s, executor, artifact_sha256) for s in specs]
    by_id = {s.rollout_id: s for s in specs}

    def aside(record: Rollout) -> tuple[str, str] | None:
        spec = by_id.get(record.rollout_id)
        if spec is None:
            return resume.aside_reason(record, None, artifact_sha256, executor, None)
        return resume.aside_reason(record, spec.resume_key, artifact_sha256, executor, spec.seed)

    writer = ShardWriter(out_path, Rollout, aside)
    todo = [s for s in specs if s.rollout_id not in writer.done]
    if len(todo) < len(specs):
        log.info(
            "resuming %s: %d of %d rollouts already recorded", out_path, len(specs) - len(todo), len(specs)
        )
    progress = Progress(len(specs), len(specs) - len(todo), str(out_path))
    gate = asyncio.Semaphore(run.concurrency)

    async def one(spec: EpisodeSpec) -> None:
        async with gate:
            # Exception, not BaseException: cancellation and KeyboardInterrupt end the job.
            try:
                text = system if isinstance(system, str) else system(spec)
                rollout = await run_episode(run, backend, spec, text, artifact_sha256, suite)
                if retrieval is not None:
                    rollout.retrieval = retrieval(spec)
                # Inside the guard: a rollout that cannot be serialised (text JSON cannot hold) is this
                # episode's failure, not the shard's.
                writer.append(rollout)
            except AuditError:
                raise
            except Exception as exc:
                log.error(
                    "%s: episode raised %s; recorded as harness_error, the shard goes on",
                    spec.rollout_id,
                    type(exc).__name__,
                    exc_info=exc,
                )
                rollout = harness_failure_rollout(backend, run, spec, artifact_sha256, exc)
                writer.append(rollout)
        progress.tick(rollout)

    try:
        await asyncio.gather(*(one(s) for s in todo))
    finally:
        writer.close()
    check_excluded_share(run.max_excluded_share, out_path, [writer.done[s.rollout_id] for s in specs])
    writer.finish([s.rollout_id for s in specs])
    return [writer.done[s.rollout_id] for s in specs]


def check_excluded_share(limit: float, out_path: str | Path, rollouts: list[Rollout]) -> None:
    """Fail the job when more than ``limit`` (``evaluation.max_excluded_share``) of its rollouts ended in a
    transient infrastructure failure (an outage, a server bug) or a harness error, instead of publishing a
    shard whose denominators quietly shrank. The partial file keeps every finished rollout; the rerun redoes
    only the failed ones."""
    failed = Counter(
        r.outcome.infra_failure for r in rollouts if r.outcome.infra_failure in resume.RECOVERABLE_FAILURES
    )
    n = sum(failed.values())
    if not rollouts or n / len(rollouts) <= limit:
        return
    classes = ", ".join(f"{kind}: {count}" for kind, count in sorted(failed.items()))
    example = next(r for r in rollouts if r.outcome.infra_failure in failed)
    raise ExcludedShareError(
        f"shard {out_path}: {n} of {len(rollouts)} rollouts ({n / len(rollouts):.1%}) ended in "
        f"infrastructure failures ({classes}), above evaluation.max_excluded_share {limit:g}; e.g. "
        f"{example.rollout_id}: {example.outcome.infra_failure_detail or example.outcome.infra_failure}. "
        f"The finished rollouts stay in {partial_path(out_path)}: fix the endpoint (for harness_error, the "
        "code: the job log has each traceback) and rerun the same command, which redoes only the failed "
        "ones (or raise evaluation.max_excluded_share)"
    )
