"""The APEX judge stage: one model's episodes, with what the rules left open sent to the judge.

Each rollout records, for its task score and (attacked) for attack success and exposure, who decided
(``outcome.decisions``; the suite's ``decisions.py``, reached through ``suite.roles``). Only the undecided
ones are asked of the configured judge endpoint (``apex.judge``: any OpenAI-compatible endpoint through its
response cache, or the simulator offline), in the order the checkers would ask; rule decisions are copied as
they are. The file written holds every rollout's final decisions, keyed by rollout id, with the judge's
request hash where it decided; the report reads it, and replay checks its judged entries against the rollouts
by request hash. An ablation arm's episodes go through the same stage (its own file beside its shards).

The judge is the suite's (its prompt, verdict schema and request hash, ``suite.roles.get_roles("apex")``);
this module gives it its transport: a chat backend (``judge_for``), its answers bounded by the endpoint's
token budget (``verdict_schema``). Offline the simulator answers it (``models.sim.roles``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evoaudit.answer_bounds import fit
from evoaudit.config import Config
from evoaudit.jsonl import read_records
from evoaudit.models.base import ChatBackend, ResponseSchema
from evoaudit.models.factory import make_backend
from evoaudit.models.structured import backend_ask
from evoaudit.provenance import write_provenance
from evoaudit.records import Decisions, JudgeFile, Rollout
from evoaudit.suite.roles import get_roles


def final_decisions(rollouts: Iterable[Rollout], judge: Any) -> dict[str, Decisions]:
    """{rollout id: {check: final decision}} for rollouts that recorded their decisions (an episode that
    failed on infrastructure recorded none and is left to the report's failure policy)."""
    roles = get_roles("apex")
    out: dict[str, Decisions] = {}
    for r in sorted(rollouts, key=lambda r: r.rollout_id):
        recorded = r.outcome.decisions
        if recorded is not None:
            out[r.rollout_id] = roles.resolve(recorded, judge)
    return out


def verdict_schema(max_tokens: int | None) -> ResponseSchema:
    """The verdict's schema, its rationale bounded so a grammar-constrained judge closes the answer inside
    ``apex.judge.max_tokens`` (``answer_bounds``). Unbounded without a budget. The rationale decides
    nothing, so the bound is the grammar's alone: the prompt, and with it every request hash, is unchanged."""
    spec = get_roles("apex").verdict_schema
    if max_tokens is None:
        return ResponseSchema.of(spec)
    schema, _ = fit(spec["schema"], max_tokens, "apex.judge.max_tokens (APEX-Harm's judge)")
    return ResponseSchema(name=spec["name"], json_schema=schema)


def judge_for(backend: ChatBackend, max_tokens: int | None = None) -> Any:
    """The suite's judge asking ``backend`` (its answers bounded to ``max_tokens``, the endpoint's budget);
    the model named in its request hash is the backend's."""
    ask = backend_ask(backend, verdict_schema(max_tokens))
    return get_roles("apex").make_judge(ask, str(backend.fingerprint().get("model", "")))


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


def read_judged(paths: Iterable[Path]) -> dict[str, Decisions]:
    """Final decisions by rollout id over the judge stage's files (every model's)."""
    out: dict[str, Decisions] = {}
    for p in paths:
        out.update(JudgeFile.read(p).decisions)
    return out
