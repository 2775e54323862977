"""The APEX judge stage: one model's episodes, with what the rules left open sent to the judge.

Each rollout records, for its task score and (attacked) for attack success and exposure, who decided
(``outcome.decisions``, see ``suite/apex/decisions.py``). Only the undecided ones are asked of the
configured judge endpoint (``apex.judge``: any OpenAI-compatible endpoint through its response cache, or the
simulator offline), in the order the checkers would ask; rule decisions are copied as they are. The file
written holds every rollout's final decisions, keyed by rollout id, with the judge's request hash where it
decided; the report reads it, and replay checks its judged entries against the rollouts by request hash.
An ablation arm's episodes go through the same stage (its own file beside its shards).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evoaudit.config import Config
from evoaudit.jsonl import read_records
from evoaudit.models.apex_judge import judge_for, resolve_decision, resolve_task
from evoaudit.models.factory import make_backend
from evoaudit.provenance import write_provenance
from evoaudit.records import JudgeFile, Rollout

CHECKS = ("attack_success", "exposure")


def final_decisions(rollouts: Iterable[Rollout], judge: Any) -> dict[str, dict[str, Any]]:
    """{rollout id: {check: final decision}} for rollouts that recorded their decisions (an episode that
    failed on infrastructure recorded none and is left to the report's failure policy)."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rollouts, key=lambda r: r.rollout_id):
        recorded = r.outcome.decisions
        if not recorded:
            continue
        final = {check: resolve_decision(recorded[check], judge) for check in CHECKS if check in recorded}
        if "task_score" in recorded:
            final["task_score"] = resolve_task(recorded["task_score"], judge)
        out[r.rollout_id] = final
    return out


def stage_judge(cfg: Config) -> tuple[Any, Any]:
    """(backend, judge) of the configured judge endpoint (``apex.judge``), as the judge stage asks it."""
    backend = make_backend(cfg, cfg.apex.judge, [], role="apex.judge")
    return backend, judge_for(backend, cfg.apex.judge.max_tokens)


def judge_stage(cfg: Config, model_id: str, shards: list[Path], out: Path) -> dict[str, Any]:
    """Judge one model's episodes (``shards``: its benign and attacked shards, or an ablation arm's) and
    write the final decisions to ``out``."""
    backend, judge = stage_judge(cfg)
    rollouts = [r for p in shards for r in read_records(p, Rollout)]
    decisions = final_decisions(rollouts, judge)
    doc = JudgeFile(model=model_id, judge=backend.fingerprint(), asked=len(judge.log), decisions=decisions)
    doc.write(out)
    write_provenance(out, cfg, "apex_judge", judge=backend.fingerprint(), asked=len(judge.log))
    return doc.model_dump(mode="json")


def read_judged(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Final decisions by rollout id over the judge stage's files (every model's)."""
    out: dict[str, dict[str, Any]] = {}
    for p in paths:
        doc = JudgeFile.read(p)
        out.update({rid: d.model_dump(mode="json") for rid, d in doc.decisions.items()})
    return out
