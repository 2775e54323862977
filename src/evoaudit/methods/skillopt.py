"""SkillOpt: a Markdown skill document improved by typed edits under a strict validation gate.

Update rule (after microsoft/SkillOpt, re-implemented): acquisition trajectories are visited in seeded
minibatches; for each, the optimizer reflects separately on the failures and on the successes and returns
at most L typed edits (append, insert_after, replace, delete) with exact-string targets. The failure patch
and the success patch are merged (failure edits first, duplicates removed, at most one edit per region).
When more edits survive than the step budget allows, the optimizer ranks them by importance and the top
ones are kept (as upstream's clipping stage does; a ranking that stays malformed falls back to the merge
order); the kept edits are applied to the current skill in ranked order. The candidate replaces the current
skill only if its utility on the validation variants of the seen families is strictly greater (ties are
rejected). The deployed state is ``best_skill.md``; every edit, its apply status, every gate score and every
decision are recorded in ``meta.json``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evoaudit.answer_bounds import fit, too_long
from evoaudit.concurrency import gather_ordered
from evoaudit.config import MethodSettings, MethodsParams
from evoaudit.hashing import sha256_json
from evoaudit.methods.common import (
    MalformedOutput,
    assistant_role,
    call_structured,
    parse_json_object,
    trajectory_text,
    with_role,
)
from evoaudit.methods.neutral import skill_placebo
from evoaudit.methods.protocol import (
    Deployed,
    EpisodeRunner,
    EvolveInputs,
    MethodBase,
    PlaceboState,
    Sections,
)
from evoaudit.models.base import ChatBackend, ResponseSchema
from evoaudit.records import Instance, Message, Rollout
from evoaudit.seeds import derive_seed

PROMPT_VERSION = "skillopt-reflect-v1"
STATE_FILE = "best_skill.md"
SECTION = "Skill"

EditKind = Literal["append", "insert_after", "replace", "delete"]
EDIT_KINDS: tuple[str, ...] = ("append", "insert_after", "replace", "delete")


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: EditKind
    target: str | None = None
    text: str | None = None
    source: Literal["failure", "success"] = "failure"

    def key(self) -> tuple[str, str | None, str | None]:
        return (self.kind, self.target, self.text)


def skill_sections(skill: str) -> list[tuple[str, str]]:
    """How a skill enters the system prompt: one ``## Skill`` section (shared by gate and evaluation)."""
    return [(SECTION, skill)]


# -- parsing ---------------------------------------------------------------------------------------

# The reflection answer's shape, as ``parse_edits`` reads it (strict structured output wants every property
# required, so an unused target or text is null). The cap, the per-kind required fields and exact targets
# are still the parser's to check. ``edits_schema`` bounds it for a config.
EDITS_SCHEMA = ResponseSchema(
    name="skillopt_edits",
    json_schema={
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "enum": list(EDIT_KINDS)},
                        "target": {"type": ["string", "null"]},
                        "text": {"type": ["string", "null"]},
                    },
                    "required": ["kind", "target", "text"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["edits"],
        "additionalProperties": False,
    },
)


def edits_schema(settings: MethodSettings) -> tuple[ResponseSchema, int]:
    """The reflection schema with at most L edits and strings short enough that the fullest answer fits
    ``optimizer.max_tokens``; and that string bound."""
    base = json.loads(json.dumps(EDITS_SCHEMA.json_schema))
    base["properties"]["edits"]["maxItems"] = settings.methods_params.skillopt.max_edits
    schema, chars = fit(base, settings.optimizer_max_tokens, "optimizer.max_tokens (SkillOpt's reflection)")
    return ResponseSchema(name=EDITS_SCHEMA.name, json_schema=schema), chars


def parse_edits(
    text: str | None, max_edits: int, source: Literal["failure", "success"], chars: int | None = None
) -> list[Edit]:
    """Strict: a JSON object with an ``edits`` list of known kinds and required fields, else malformed.

    Edits beyond ``max_edits`` are dropped (the cap L is part of the update rule, not an error). A target
    or text longer than ``chars`` (the schema's bound, from a server that ignored it) is malformed.
    """
    obj = parse_json_object(text)
    raw = obj.get("edits")
    if not isinstance(raw, list):
        raise MalformedOutput("the object must have an 'edits' list")
    edits = []
    for i, item in enumerate(raw[:max_edits]):
        if not isinstance(item, dict):
            raise MalformedOutput(f"edits[{i}] is not an object")
        kind = item.get("kind")
        if kind not in EDIT_KINDS:
            raise MalformedOutput(f"edits[{i}].kind {kind!r} is not one of {', '.join(EDIT_KINDS)}")
        if kind != "append" and not (isinstance(item.get("target"), str) and item["target"]):
            raise MalformedOutput(f"edits[{i}] ({kind}) needs a non-empty 'target' string")
        if kind != "delete" and not isinstance(item.get("text"), str):
            raise MalformedOutput(f"edits[{i}] ({kind}) needs a 'text' string")
        for key in ("target", "text"):
            if chars is not None and too_long(item.get(key), chars):
                raise MalformedOutput(f"edits[{i}].{key} is longer than {chars} characters")
        try:
            edits.append(
                Edit(
                    kind=kind,
                    target=item.get("target") if kind != "append" else None,
                    text=item.get("text") if kind != "delete" else None,
                    source=source,
                )
            )
        except ValidationError as exc:
            raise MalformedOutput(f"edits[{i}]: {exc.errors()[0]['msg']}") from exc
    return edits


# -- application -----------------------------------------------------------------------------------


def protected_spans(doc: str, protected: tuple[str, ...]) -> list[tuple[int, int]]:
    spans = []
    for p in protected:
        start = doc.find(p)
        while start != -1:
            spans.append((start, start + len(p)))
            start = doc.find(p, start + 1)
    return spans


def _overlaps(a: int, b: int, spans: list[tuple[int, int]]) -> bool:
    return any(a < e and s < b for s, e in spans)


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < pos < e for s, e in spans)


def _append(doc: str, text: str) -> str:
    body = doc if doc.endswith("\n") or not doc else doc + "\n"
    return body + text.strip("\n") + "\n"


def apply_edit(doc: str, edit: Edit, protected: tuple[str, ...]) -> tuple[str, str]:
    """One edit under the rules; returns (new document, status).

    replace/delete act on the first occurrence of the target and are skipped when it is missing;
    insert_after appends when its target is missing; nothing may change a protected region.
    """
    spans = protected_spans(doc, protected)
    if edit.kind == "append":
        return _append(doc, edit.text or ""), "applied"
    assert edit.target is not None
    at = doc.find(edit.target)
    if edit.kind == "insert_after":
        if at == -1:
            return _append(doc, edit.text or ""), "appended_missing_target"
        pos = at + len(edit.target)
        if _inside(pos, spans):
            return doc, "skipped_protected"
        return doc[:pos] + "\n" + (edit.text or "").strip("\n") + doc[pos:], "applied"
    if at == -1:
        return doc, "skipped_missing_target"
    end = at + len(edit.target)
    if _overlaps(at, end, spans):
        return doc, "skipped_protected"
    new = "" if edit.kind == "delete" else (edit.text or "")
    return doc[:at] + new + doc[end:], "applied"


def merge_patches(
    failure: list[Edit], success: list[Edit], doc: str
) -> tuple[list[Edit], list[dict[str, Any]]]:
    """Failure edits first, then success edits; duplicates removed; at most one edit per region (the
    first-occurrence span of its target). Returns the merged pool (not yet clipped to the step budget:
    see ``rank_and_clip``) and a record for every edit dropped, with why."""
    kept: list[Edit] = []
    dropped: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None, str | None]] = set()
    regions: list[tuple[int, int]] = []
    for edit in [*failure, *success]:
        if edit.key() in seen:
            dropped.append({**edit.model_dump(), "status": "dropped_duplicate"})
            continue
        seen.add(edit.key())
        if edit.target is not None:
            at = doc.find(edit.target)
            if at != -1:
                span = (at, at + len(edit.target))
                # A point insertion at the end of a target touches the same region as an edit of it.
                if any(span[0] < e and s < span[1] or span == (s, e) for s, e in regions):
                    dropped.append({**edit.model_dump(), "status": "dropped_region_conflict"})
                    continue
                regions.append(span)
        kept.append(edit)
    return kept, dropped


# -- ranking before the clip -----------------------------------------------------------------------
# After microsoft/SkillOpt (skillopt/optimizer/clip.py, prompts/ranking.md): when the merged pool is over
# the edit budget, the optimizer ranks the edits by importance (recurring failure patterns first, then
# filling gaps in the document, generality, concreteness) and returns indices in priority order; the top
# ones are applied. Within budget the pool is applied as merged. Paraphrased, not copied.

_RANK = """You rank proposed edits to a skill document: short Markdown guidance placed in the system \
prompt of a {assistant_role} that works through tools. You see the current document and a numbered pool \
of edits, more than can be applied in one step.

Rank the edits by importance, most important first:
1. edits that prevent failures recurring across many requests come before fixes of a single case;
2. edits that add what the document lacks come before edits repeating what it already says;
3. general principles come before guidance tied to one kind of request or one entity;
4. clear, concrete guidance comes before vague advice.

Reply with one JSON object {"selected_indices": [...], "reasoning": "one sentence"} listing the \
0-based indices of the edits to keep, most important first, at most the number you are told."""


def ranking_messages(
    doc: str, pool: list[Edit], budget: int, suite: str = "banking", chars: int | None = None
) -> list[Message]:
    lines = "\n".join(
        f"[{i}] " + json.dumps(e.model_dump(exclude_none=True), sort_keys=True) for i, e in enumerate(pool)
    )
    user = (
        f"Current skill document:\n<<<\n{doc}\n>>>\n\nEdit pool ({len(pool)} edits, budget {budget}):\n"
        f"{lines}\n\nSelect the {budget} most important edits."
    )
    if chars is not None:  # what the schema enforces, told
        user += f" The reasoning is at most {chars} characters."
    system = with_role(_RANK, assistant_role(suite))
    return [Message(role="system", content=system), Message(role="user", content=user)]


# The ranking answer's shape, as ``parse_ranking`` reads it; ``ranking_schema`` bounds it per call.
RANKING_SCHEMA = ResponseSchema(
    name="skillopt_ranking",
    json_schema={
        "type": "object",
        "properties": {
            "selected_indices": {"type": "array", "items": {"type": "integer"}},
            "reasoning": {"type": "string"},
        },
        "required": ["selected_indices", "reasoning"],
        "additionalProperties": False,
    },
)


def ranking_schema(settings: MethodSettings, pool_size: int) -> tuple[ResponseSchema, int]:
    """At most ``step_budget`` indices into the pool and a reasoning that fits ``optimizer.max_tokens``."""
    base = json.loads(json.dumps(RANKING_SCHEMA.json_schema))
    base["properties"]["selected_indices"]["maxItems"] = settings.methods_params.skillopt.step_budget
    base["properties"]["selected_indices"]["items"].update(minimum=0, maximum=pool_size - 1)
    schema, chars = fit(base, settings.optimizer_max_tokens, "optimizer.max_tokens (SkillOpt's ranking)")
    return ResponseSchema(name=RANKING_SCHEMA.name, json_schema=schema), chars


def parse_ranking(text: str | None, pool_size: int, budget: int, chars: int | None = None) -> list[int]:
    """Valid, distinct indices in priority order, at most ``budget``; malformed when none is usable or the
    reasoning is longer than ``chars``."""
    obj = parse_json_object(text)
    if chars is not None and too_long(obj.get("reasoning"), chars):
        raise MalformedOutput(f"'reasoning' is longer than {chars} characters")
    raw = obj.get("selected_indices")
    if not isinstance(raw, list):
        raise MalformedOutput("expected a 'selected_indices' list")
    picked: list[int] = []
    for idx in raw:
        if isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < pool_size and idx not in picked:
            picked.append(idx)
    if not picked:
        raise MalformedOutput(f"no valid index in 'selected_indices' (pool of {pool_size})")
    return picked[:budget]


async def rank_and_clip(
    settings: MethodSettings,
    lineage: str,
    step: int,
    doc: str,
    pool: list[Edit],
    optimizer: ChatBackend,
) -> tuple[list[Edit], list[dict[str, Any]], dict[str, Any]]:
    """The edits to apply (ranked, at most ``step_budget``), a record per clipped edit, and how it was
    ranked: ``within_budget`` (no call), ``optimizer``, or ``fallback_merge_order`` (malformed replies)."""
    budget = settings.methods_params.skillopt.step_budget
    if len(pool) <= budget:
        return pool, [], {"method": "within_budget", "pool": len(pool), "budget": budget}
    schema, chars = ranking_schema(settings, len(pool))
    order, call_log = await call_structured(
        optimizer,
        ranking_messages(doc, pool, budget, settings.suite_name, chars),
        lambda t: parse_ranking(t, len(pool), budget, chars),
        seed=lambda a: derive_seed(settings.seed, lineage, step, "rank", a),
        max_attempts=settings.methods_params.max_attempts,
        purpose=f"rank/step{step}",
        schema=schema,
    )
    method = "optimizer" if order is not None else "fallback_merge_order"
    order = order if order is not None else list(range(budget))
    clipped = [
        {**e.model_dump(), "status": "clipped_budget", "pool_index": i}
        for i, e in enumerate(pool)
        if i not in order
    ]
    info = {"method": method, "pool": len(pool), "budget": budget, "order": order, "call": call_log.as_dict()}
    return [pool[i] for i in order], clipped, info


def apply_patch(doc: str, edits: list[Edit], protected: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
    log = []
    for edit in edits:
        doc, status = apply_edit(doc, edit, protected)
        log.append({**edit.model_dump(), "status": status})
    return doc, log


# -- prompts ---------------------------------------------------------------------------------------

_SYSTEM = """You maintain a skill document: short Markdown guidance that is placed in the system prompt \
of a {assistant_role} that works through tools. You will see the current skill document and a few \
trajectories of the assistant on past requests, each labelled by an automatic checker.

Propose edits to the skill document so that the assistant handles similar requests correctly. Keep the \
guidance general: no names, amounts, dates or identifiers copied from a single request.

Reply with one JSON object of the form {{"edits": [...]}} holding at most {max_edits} edits. Edit kinds:
- {{"kind": "append", "text": "..."}} adds text at the end of the document;
- {{"kind": "insert_after", "target": "...", "text": "..."}} adds text right after the target;
- {{"kind": "replace", "target": "...", "text": "..."}} rewrites the target;
- {{"kind": "delete", "target": "..."}} removes the target.
A target is text copied exactly from the current document.{length} \
These lines are fixed and must not be edited:
{protected}
Reply {{"edits": []}} when nothing should change."""

_FOCUS = {
    "failure": "Focus: the failed trajectories. Work out what went wrong and add guidance that prevents it.",
    "success": "Focus: the successful trajectories. Capture the practice that made them work, if the "
    "document does not already say it.",
}


def reflection_messages(
    doc: str,
    trajectories: list[tuple[Rollout, bool]],
    focus: Literal["failure", "success"],
    settings: MethodSettings,
) -> list[Message]:
    p = settings.methods_params.skillopt
    template = with_role(_SYSTEM, assistant_role(settings.suite_name))
    _, chars = edits_schema(settings)
    length = f" A target and a text are each at most {chars} characters."
    system = template.format(
        max_edits=p.max_edits, protected="\n".join(f"- {x}" for x in p.protected), length=length
    )
    shown = "\n\n".join(trajectory_text(r, label, i) for i, (r, label) in enumerate(trajectories, 1))
    user = f"{_FOCUS[focus]}\n\nCurrent skill document:\n<<<\n{doc}\n>>>\n\nTrajectories:\n\n{shown}"
    return [Message(role="system", content=system), Message(role="user", content=user)]


# -- validation gate -------------------------------------------------------------------------------


@dataclass
class GateScore:
    score: float
    successes: int
    scored: int
    infra_failures: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "successes": self.successes,
            "scored": self.scored,
            "infra_failures": self.infra_failures,
        }


async def gate_score(
    settings: MethodSettings, episodes: EpisodeRunner, lineage: str, skill: str, instances: list[Instance]
) -> GateScore:
    """Utility of the executor with ``skill`` on the validation instances. The same seeds for every
    candidate, so that two skills are compared on the same draws."""
    seeds = [derive_seed(settings.seed, lineage, inst.instance_id, None, "gate") for inst in instances]
    results = await episodes.utilities(skill_sections(skill), instances, seeds)
    scored = [r for r in results if r is not None]
    wins = sum(scored)
    return GateScore(
        score=wins / len(scored) if scored else 0.0,
        successes=wins,
        scored=len(scored),
        infra_failures=len(results) - len(scored),
    )


# -- the loop --------------------------------------------------------------------------------------


async def optimise(
    settings: MethodSettings,
    lineage: str,
    labelled: list[tuple[Rollout, bool]],
    validation: list[Instance],
    optimizer: ChatBackend,
    episodes: EpisodeRunner,
    start: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Returns the best skill and the diagnostics for ``meta.json``. ``start`` is the document to improve
    (a later round's: the previous round's skill); None starts from ``initial_skill``.

    Long on purpose: a minibatch's steps share the current skill, its gate score and the update record."""
    p = settings.methods_params.skillopt
    current = p.initial_skill if start is None else start
    for text in p.protected:
        if text not in current:
            raise ValueError(
                f"methods_params.skillopt.protected: {text!r} does not occur in initial_skill; a protected "
                "region must be part of the starting document"
            )
    current_score = await gate_score(settings, episodes, lineage, current, validation)
    initial_score = current_score
    updates: list[dict[str, Any]] = []
    reflect_schema, chars = edits_schema(settings)
    for epoch in range(p.epochs):
        order = list(labelled)
        random.Random(derive_seed(settings.seed, lineage, epoch, "reflect-order")).shuffle(order)
        for start in range(0, len(order), p.batch_size):
            step = len(updates)
            batch = order[start : start + p.batch_size]
            update: dict[str, Any] = {
                "step": step,
                "epoch": epoch,
                "trajectories": [r.rollout_id for r, _ in batch],
                "calls": [],
            }
            patches: dict[str, list[Edit]] = {"failure": [], "success": []}
            parts = [
                (focus, [(r, label) for r, label in batch if label == want])
                for focus, want in (("failure", False), ("success", True))
            ]
            parts = [(focus, part) for focus, part in parts if part]

            async def reflect(
                job: tuple[str, list], step: int = step, skill: str = current
            ) -> tuple[list[Edit] | None, Any]:
                focus, part = job
                return await call_structured(
                    optimizer,
                    reflection_messages(skill, part, focus, settings),
                    lambda t: parse_edits(t, p.max_edits, focus, chars),
                    seed=lambda a: derive_seed(settings.seed, lineage, step, focus, "reflect", a),
                    max_attempts=settings.methods_params.max_attempts,
                    purpose=f"reflect/{focus}/step{step}",
                    schema=reflect_schema,
                )

            # The two reflections read the same skill and disjoint trajectories: ask both at once,
            # record them failure first, as the serial loop did.
            answers = await gather_ordered(reflect, parts, settings.optimizer_concurrency)
            for (focus, _), (edits, call_log) in zip(parts, answers, strict=True):
                update["calls"].append(call_log.as_dict())
                patches[focus] = edits or []
            failed_calls = [c for c in update["calls"] if not c["ok"]]
            update["failed"] = bool(update["calls"]) and len(failed_calls) == len(update["calls"])
            pool, dropped = merge_patches(patches["failure"], patches["success"], current)
            ranked = await rank_and_clip(settings, lineage, step, current, pool, optimizer)
            kept, clipped, update["ranking"] = ranked
            candidate, applied = apply_patch(current, kept, p.protected)
            update["edits"] = applied + dropped + clipped
            if candidate == current:
                update["decision"] = "failed_update" if update["failed"] else "no_change"
                updates.append(update)
                continue
            cand_score = await gate_score(settings, episodes, lineage, candidate, validation)
            accepted = cand_score.score > current_score.score  # strict: ties are rejected
            update.update(
                {
                    "gate_current": current_score.as_dict(),
                    "gate_candidate": cand_score.as_dict(),
                    "candidate_sha256": sha256_json(candidate),
                    "decision": "accepted" if accepted else "rejected",
                }
            )
            updates.append(update)
            if accepted:
                current, current_score = candidate, cand_score
    return current, _diagnostics(labelled, validation, initial_score, current_score, updates, current)


def _diagnostics(
    labelled, validation, initial_score, final_score, updates: list[dict], skill: str
) -> dict[str, Any]:
    """SkillOpt's ``meta.json`` diagnostics: the gate's scores and every update's decision."""
    return {
        "prompt_version": PROMPT_VERSION,
        "trajectories": len(labelled),
        "validation_instances": [i.instance_id for i in validation],
        "gate_initial": initial_score.as_dict(),
        "gate_final": final_score.as_dict(),
        "updates": updates,
        "gate_scores": [initial_score.score]
        + [u["gate_candidate"]["score"] for u in updates if "gate_candidate" in u],
        "decisions": [u["decision"] for u in updates],
        "n_updates": len(updates),
        "n_accepted": sum(u["decision"] == "accepted" for u in updates),
        "n_rejected": sum(u["decision"] == "rejected" for u in updates),
        "n_failed_updates": sum(u["decision"] == "failed_update" for u in updates),
        "skill_chars": len(skill),
    }


def validation_instances(variants: tuple[str, ...], learning: list[Instance]) -> list[Instance]:
    """SkillOpt's gate set: validation-role ``variants`` of the seen families (never an endpoint variant)."""
    chosen = [i for i in learning if i.split == "seen" and i.variant in variants]
    return sorted(chosen, key=lambda i: i.instance_id)


def write_state(out_dir: Path, skill: str) -> dict[str, str]:
    return {STATE_FILE: skill}


class SkillOpt(MethodBase):
    """SkillOpt as a ``Method``: the gate runs the executor on the validation variants."""

    name = "skillopt"
    learns = True
    state_file = STATE_FILE
    section = SECTION
    unit_kind = "skill line"  # the lines its edits append, insert and replace

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        return Sections(skill_sections((artifact_dir / STATE_FILE).read_text()))

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """A Markdown document shaped like the real skill: its title, then neutral bullets."""
        real = (real_dir / STATE_FILE).read_text()
        fake = skill_placebo(real, rng)
        return PlaceboState({STATE_FILE: fake}, len(real), len(fake))

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        """One validation-gate pass per update: updates = minibatches x epochs."""
        if not validation:
            return 0
        sp = params.skillopt
        return math.ceil(acquisition / sp.batch_size) * sp.epochs * validation

    def success_label(self, params: MethodsParams) -> str:
        return params.success_label

    def check_budgets(self, settings: MethodSettings) -> None:
        edits_schema(settings)

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        episodes = inputs.episodes
        if episodes is None:
            raise ValueError(
                "skillopt: the gate runs executor episodes; the evolve job gave no episode runner"
            )
        variants = episodes.validation_variants
        validation = validation_instances(variants, inputs.learning)
        if not validation:
            raise ValueError(
                f"skillopt: no validation instances (roles.validation={list(variants)} of seen families); "
                "the gate needs at least one"
            )
        start = (inputs.prior / STATE_FILE).read_text() if inputs.prior is not None else None
        skill, diag = await optimise(
            inputs.settings, inputs.lineage, inputs.labelled, validation, inputs.optimizer, episodes, start
        )
        return {STATE_FILE: skill}, diag | {"executor": episodes.fingerprint()}


SKILLOPT = SkillOpt()
