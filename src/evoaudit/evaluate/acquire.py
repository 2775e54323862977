"""Acquisition: the unevolved executor on seen families × acquisition variants, per lineage.

Every method of a lineage evolves from this one record; its sha256 is written beside it when the run
finishes and asserted by each evolve job (matched acquisition).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from evoaudit import atomic
from evoaudit.agent.profile import configured_prompt
from evoaudit.config import Config
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.hashing import sha256_file
from evoaudit.models.factory import make_backend
from evoaudit.provenance import write_provenance
from evoaudit.seal.guard import load_learning_instances
from evoaudit.suite.stage import verify_table


def acquire(cfg: Config, lineage: str, table: Path, spec: Path, out: Path, record: Path) -> dict:
    verify_table(table, spec)
    learning = load_learning_instances(table, cfg.roles.endpoint_variants, spec)
    chosen = [i for i in learning if i.split == "seen" and i.variant in cfg.roles.acquisition]
    backend = make_backend(cfg, cfg.executor, learning)
    specs = plan_episodes(lineage, "acquire", "benign", chosen, [])
    rollouts = asyncio.run(run_specs(cfg, backend, specs, configured_prompt(cfg), None, out))
    info = {
        "lineage": lineage,
        "path": out.as_posix(),
        "sha256": sha256_file(out),
        "rollouts": len(rollouts),
        "successes": sum(r.outcome.utility for r in rollouts),
        "infra_failures": sum(r.outcome.infra_failure is not None for r in rollouts),
        "executor": backend.fingerprint(),
    }
    atomic.write_text(record, json.dumps(info, indent=2, sort_keys=True) + "\n")
    write_provenance([out, record], cfg, "acquire", spec=spec, executor=info["executor"])
    return info
