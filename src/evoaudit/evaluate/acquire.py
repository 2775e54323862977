"""Acquisition: the unevolved executor on seen families × acquisition variants, per lineage.

Every method of a lineage evolves from this one record; its sha256 is written beside it when the run
finishes and asserted by each evolve job (matched acquisition).
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

from evoaudit.agent.profile import configured_prompt
from evoaudit.config import Config
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.evaluate.stage import deployed_prompts
from evoaudit.hashing import sha256_file
from evoaudit.methods.artifact import read_meta
from evoaudit.methods.conditions import Insertion, condition
from evoaudit.models.factory import make_backend
from evoaudit.provenance import write_provenance
from evoaudit.records import AcquisitionRecord
from evoaudit.seal.guard import load_learning_instances
from evoaudit.seal.manifest import artifact_sha256
from evoaudit.suite.stage import verify_table


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
    verify_table(table, spec)
    learning = load_learning_instances(table, cfg.roles.endpoint_variants, spec)
    chosen = [i for i in learning if i.split == "seen" and i.variant in cfg.roles.acquisition]
    backend = make_backend(cfg, cfg.executor, learning)
    name = "acquire" if prior is None else f"acquire-round{round_index}"
    specs = plan_episodes(lineage, name, "benign", chosen, [])
    if prior is None:
        system, retrieval, artifact_sha = configured_prompt(cfg), None, None
    else:
        meta = read_meta(prior)
        insertion = Insertion(condition(meta.method), prior)
        system, retrieval = deployed_prompts(partial(configured_prompt, cfg), insertion, specs)
        artifact_sha = artifact_sha256(prior)
    rollouts = asyncio.run(run_specs(cfg, backend, specs, system, artifact_sha, out, retrieval))
    later: dict[str, Any] = {}
    if prior is not None:
        later = {"round": round_index, "deployed": prior.as_posix(), "deployed_sha256": artifact_sha}
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
