"""Acquisition: the unevolved executor on seen families × acquisition variants, per lineage.

Every method of a lineage evolves from this one record; its sha256 is written beside it when the run
finishes and asserted by each evolve job (matched acquisition).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoaudit.config import Config
from evoaudit.evaluate.job import EpisodeJob
from evoaudit.evaluate.runner import EpisodeSpec, plan_episodes, run_specs
from evoaudit.evaluate.stage import deployed_prompts
from evoaudit.hashing import sha256_file
from evoaudit.methods.artifact import read_meta
from evoaudit.methods.conditions import Insertion, deployment
from evoaudit.models.factory import make_backend
from evoaudit.poisoning import PoisonedLineage, poisoned, poisoned_episodes
from evoaudit.provenance import write_provenance
from evoaudit.records import AcquisitionRecord
from evoaudit.seal.manifest import artifact_sha256


def acquire(
    cfg: Config,
    lineage: str,
    table: Path,
    spec: Path,
    out: Path,
    record: Path,
    *,
    prior: Path | None = None,
    round_index: int = 1,
) -> dict:
    """The acquisition record of one lineage. A later round (``methods_params.rounds``) passes the previous
    round's artifact as ``prior``: the same episodes (the same seeds: common random numbers across rounds)
    with that artifact deployed, named ``acquire-round<r>``; its artifact is not frozen yet, so it is
    identified by its files' hashes, as SkillOpt's gate identifies a candidate."""
    job = EpisodeJob.acquisition(cfg, table, spec)
    learning = list(job.instances)
    chosen = [i for i in learning if i.split == "seen" and i.variant in cfg.roles.acquisition]
    backend = make_backend(cfg, cfg.executor, learning, suite=job.suite)
    name = "acquire" if prior is None else f"acquire-round{round_index}"
    specs = plan_episodes(lineage, name, "benign", chosen, [])
    poison = poisoned(cfg, lineage)
    placed: list[str] = []
    if poison is not None:
        # The episodes the poison can reach: those where the suite places something for its goal.
        reach = {i.instance_id for i in chosen if job.suite.injections(cfg.suite, i, poison.goal)}
        specs, placed = poison_specs(cfg.seed, poison, specs, reach)
    if prior is None:
        system, retrieval, artifact_sha = job.prompt(), None, None
    else:
        meta = read_meta(prior)
        insertion = Insertion(deployment(meta.method), prior)
        system, retrieval = deployed_prompts(job.prompt, insertion, specs)
        artifact_sha = artifact_sha256(prior)
    rollouts = asyncio.run(
        run_specs(job.run, backend, specs, system, artifact_sha, out, retrieval, suite=job.suite)
    )
    later: dict[str, Any] = {}
    if prior is not None:
        later = {"round": round_index, "deployed": prior.as_posix(), "deployed_sha256": artifact_sha}
    if poison is not None:
        later |= {
            "poison_twin": poison.twin,
            "poison_goal": poison.goal,
            "poison_share": poison.share,
            "poison_attack": cfg.poisoning.attack,
            "poisoned_episodes": placed,
        }
    info = AcquisitionRecord(
        lineage=lineage,
        path=out.as_posix(),
        sha256=sha256_file(out),
        rollouts=len(rollouts),
        successes=sum(r.outcome.utility for r in rollouts),
        infra_failures=sum(r.outcome.infra_failure is not None for r in rollouts),
        executor=backend.fingerprint(),
        **later,
    )
    info.write(record)
    write_provenance([out, record], cfg, "acquire", spec=spec, executor=info.executor)
    return info.model_dump(mode="json")


def poison_specs(
    seed: int, poison: PoisonedLineage, specs: list[EpisodeSpec], reach: set[str]
) -> tuple[list[EpisodeSpec], list[str]]:
    """A poisoned lineage's acquisition episodes: every one with its twin's seed, and the chosen share of
    those the poison can reach (their instance ids in ``reach``) carrying the poison goal, placed by the
    suite's attack like an attacked episode's, with the benign episode's seed. Returns the episodes and the
    rollout ids that carry the poison."""
    twin = [replace(s, twin=poison.twin) for s in specs]
    reachable = [s.rollout_id for s in twin if s.instance.instance_id in reach]
    chosen = set(poisoned_episodes(seed, poison, reachable, len(twin)))
    out = [replace(s, goal=poison.goal, poisoned=True) if s.rollout_id in chosen else s for s in twin]
    return sorted(out, key=lambda s: s.rollout_id), sorted(s.rollout_id for s in out if s.poisoned)
