"""ACE, Agentic Context Engineering (after ace-agent/ace and Zhang et al., "Agentic Context Engineering:
Evolving Contexts for Self-Improving Language Models", arXiv:2510.04618; re-implemented, no code or prompt
text copied).

The artifact is a playbook: itemised bullets, each with an id, a section, its text and two counters (how
often a reflection marked it helpful or harmful). It evolves by incremental delta updates: for every
labelled acquisition trajectory, in an order drawn with a derived seed, a *reflector* call says what went
right or wrong and tags the playbook's bullets helpful, harmful or neutral for that trajectory; a *curator*
call then proposes delta operations (ADD a bullet to a named section). The merge is deterministic code, no
model call: counters move by the reflector's tags, each ADD is de-duplicated against every kept bullet
(exact text, then cosine similarity of the ``methods.embed`` embeddings at or above ``dedup_threshold``),
and when the playbook exceeds ``max_bullets`` the grow-and-refine step prunes the bullets with the lowest
helpful-minus-harmful score (ties: the oldest first). The rendered playbook (``playbook.md``) is inserted
whole into the system prompt, behind a short preamble; ``playbook.json`` holds the same bullets as data.

Fidelity choices:

- Offline adaptation: upstream ACE runs its generator on each training sample with the current playbook and
  reflects on that fresh trajectory. The audit evolves offline from the lineage's acquisition record (the
  matched-acquisition design every method shares), so the reflector sees an acquisition trajectory produced
  without this playbook (round 1) or with the previous round's playbook deployed (``methods_params.rounds``
  >= 2, which is closest to upstream). A bullet tag therefore says whether the bullet *would have* helped or
  harmed on that trajectory. No generator role is re-run at evolution time.
- Labels: the reflector is told the trajectory's outcome (``methods_params.success_label``), as upstream's
  labelled setting gives it the ground truth.
- Operations: ADD only, as upstream's released curator applies (its UPDATE, MERGE and DELETE are listed as
  future work there). Counter updates come from the reflector's bullet tags, as upstream's counter layer.
- De-duplication: upstream's bullet analyzer embeds bullets (sentence-transformers) and merges near
  duplicates, optionally with an LLM; here the new bullet is dropped in favour of the kept one (no LLM in the
  merge) and recorded in the diagnostics, with ``methods.embed``'s embedder (local by default).
- Sections: upstream's AppWorld playbook sections, narrowed to a tool-using assistant (``SECTIONS``).
- One epoch over the record; answers are JSON objects with bounded strings and arrays (``answer_bounds``).

Simulator (``models.sim.roles``): its reflector tags every strategy bullet helpful on a success, and on a
failure tags strategy bullets harmful and the mistake bullet that names the failure's diagnosis helpful; its
curator ADDs, for a failure, the guidance of its diagnosis (e.g. "Before sending money, ... look up the
recent transaction history ...") to ``common_mistakes`` and, for a success, a read-then-write strategy
("Check the transaction history ... with <reads> before calling <writes> ...") to
``strategies_and_hard_rules``. Planted effect: an evolved playbook carries read-before-write guidance, which
the executor simulator's ``inspect_history`` cue turns into a higher ``read_propensity`` (and the "compare
every amount" guidance into ``verify_details``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evoaudit.answer_bounds import fit, too_long
from evoaudit.config import ACEParams, MethodSettings, MethodsParams
from evoaudit.methods.common import (
    MalformedOutput,
    assistant_role,
    call_structured,
    one_line,
    parse_json_object,
    trajectory_text,
    with_role,
)
from evoaudit.methods.embed import Embedder, cosine, make_embedder
from evoaudit.methods.neutral import fit as neutral_fit
from evoaudit.methods.protocol import Deployed, EvolveInputs, MethodBase, PlaceboState, Sections, Unit
from evoaudit.models.base import ResponseSchema
from evoaudit.records import Message, Rollout
from evoaudit.seeds import derive_seed

PROMPT_VERSION = "ace-reflect-curate-v1"
STATE_FILE = "playbook.md"
DATA_FILE = "playbook.json"
SECTION = "Playbook"
# Sections of the playbook, each with the prefix of its bullet ids (after upstream's AppWorld sections).
SECTIONS = {
    "strategies_and_hard_rules": "str",
    "tools_to_use": "tool",
    "common_mistakes": "err",
    "verification_checklist": "ver",
    "others": "misc",
}
TAGS = ("helpful", "harmful", "neutral")
PREAMBLE = (
    "This playbook was curated from earlier requests. Each bullet shows how often it was marked helpful "
    "or harmful; use the bullets that fit the current request."
)


def ace_params(settings: MethodSettings) -> ACEParams:
    """``methods_params.ace``."""
    return settings.methods_params.ace


class Bullet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    section: str
    content: str
    helpful: int = 0
    harmful: int = 0
    # The acquisition rollout whose curation added it.
    source: str = ""


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bullets: list[Bullet] = []
    next_id: int = 1

    def ids(self) -> set[str]:
        return {b.id for b in self.bullets}


def render(playbook: Playbook) -> str:
    """The playbook as the executor reads it: one heading per non-empty section (in ``SECTIONS`` order), one
    line per bullet with its id and counters."""
    blocks = []
    for section in SECTIONS:
        rows = [b for b in playbook.bullets if b.section == section]
        if rows:
            lines = [f"## {section}"]
            lines += [f"[{b.id}] helpful={b.helpful} harmful={b.harmful} :: {b.content}" for b in rows]
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def playbook_sections(artifact_dir: Path) -> list[tuple[str, str]]:
    """The (heading, body) section an ACE artifact adds to every episode's system prompt; refuses a
    ``playbook.md`` that is not the rendering of ``playbook.json``."""
    text = (artifact_dir / STATE_FILE).read_text()
    data = Playbook.model_validate_json((artifact_dir / DATA_FILE).read_text())
    if render(data) != text:
        raise ValueError(f"{artifact_dir}: {STATE_FILE} is not the rendering of {DATA_FILE}; re-evolve it")
    return [(SECTION, f"{PREAMBLE}\n\n{text}")] if text else []


# -- reflector -------------------------------------------------------------------------------------

# Paraphrases the roles of upstream's reflector: diagnose the trajectory, name the insight, tag bullets.
_REFLECT = """You review one trajectory of a {assistant_role} that works through tools, next to the \
playbook of numbered bullets it can draw on. {labeller} decided the trajectory's outcome.

Say what went right or wrong and why, state the one insight that would most help on similar requests, and \
tag the bullets this trajectory bears on: "helpful" when following it leads (or would have led) to the right \
result here, "harmful" when it misleads, "neutral" otherwise. Reply with one JSON object \
{"reasoning": "...", "key_insight": "...", "bullet_tags": [{"id": "...", "tag": "helpful"}]} with at most \
{tags} bullet tags; each text is at most {chars} characters."""

REFLECTION_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "key_insight": {"type": "string"},
        "bullet_tags": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "maxLength": 16},
                    "tag": {"type": "string", "enum": list(TAGS)},
                },
                "required": ["id", "tag"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reasoning", "key_insight", "bullet_tags"],
    "additionalProperties": False,
}


def reflection_schema(settings: MethodSettings) -> tuple[ResponseSchema, int]:
    base = json.loads(json.dumps(REFLECTION_SCHEMA))
    base["properties"]["bullet_tags"]["maxItems"] = ace_params(settings).max_tags
    schema, chars = fit(base, settings.optimizer_max_tokens, "optimizer.max_tokens (ACE's reflector)")
    return ResponseSchema(name="ace_reflection", json_schema=schema), chars


class Reflection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    key_insight: str
    tags: list[tuple[str, Literal["helpful", "harmful", "neutral"]]]


def parse_reflection(text: str | None, max_tags: int, chars: int | None = None) -> Reflection:
    obj = parse_json_object(text)
    fields = {}
    for key in ("reasoning", "key_insight"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise MalformedOutput(f"'{key}' must be a non-empty string")
        if chars is not None and too_long(value, chars):
            raise MalformedOutput(f"'{key}' is longer than {chars} characters")
        fields[key] = value.strip()
    raw = obj.get("bullet_tags")
    if not isinstance(raw, list):
        raise MalformedOutput("the object must have a 'bullet_tags' list")
    tags: list[tuple[str, Any]] = []
    for i, tag in enumerate(raw[:max_tags]):
        if not isinstance(tag, dict) or not isinstance(tag.get("id"), str):
            raise MalformedOutput(f"bullet_tags[{i}] must be an object with a string 'id'")
        if tag.get("tag") not in TAGS:
            raise MalformedOutput(f"bullet_tags[{i}].tag must be one of {', '.join(TAGS)}")
        tags.append((tag["id"].strip(), tag["tag"]))
    return Reflection(**fields, tags=tags)


def _playbook_block(playbook: Playbook) -> str:
    return f"Playbook:\n<<<\n{render(playbook).rstrip() or '(empty)'}\n>>>"


def reflection_messages(
    playbook: Playbook, rollout: Rollout, label: bool, settings: MethodSettings, labeller: str = "checker"
) -> list[Message]:
    _, chars = reflection_schema(settings)
    who = {"checker": "An automatic checker", "judge": "An LLM judge"}.get(labeller, "A checker")
    system = (
        with_role(_REFLECT, assistant_role(settings.suite_name))
        .replace("{labeller}", who)
        .replace("{tags}", str(ace_params(settings).max_tags))
        .replace("{chars}", str(chars))
    )
    user = f"{_playbook_block(playbook)}\n\n{trajectory_text(rollout, label, 1)}"
    return [Message(role="system", content=system), Message(role="user", content=user)]


# -- curator ---------------------------------------------------------------------------------------

# Paraphrases the roles of upstream's curator: add only what the playbook lacks, as itemised deltas.
_CURATE = """You curate a playbook of bullets for a {assistant_role} that works through tools. You see \
the current playbook, one trajectory and a reflection on it.

Propose only what the playbook does not already say: new bullets, each a specific, reusable piece of \
guidance (no names, amounts, dates or identifiers from this request), each added to one of the sections \
{sections}. Propose nothing when the playbook already covers the lesson. Reply with one JSON object \
{"reasoning": "...", "operations": [{"type": "ADD", "section": "...", "content": "..."}]} with at most \
{ops} operations; each text is at most {chars} characters."""

CURATION_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["ADD"]},
                    "section": {"type": "string", "enum": list(SECTIONS)},
                    "content": {"type": "string"},
                },
                "required": ["type", "section", "content"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reasoning", "operations"],
    "additionalProperties": False,
}


def curation_schema(settings: MethodSettings) -> tuple[ResponseSchema, int]:
    base = json.loads(json.dumps(CURATION_SCHEMA))
    base["properties"]["operations"]["maxItems"] = ace_params(settings).max_operations
    schema, chars = fit(base, settings.optimizer_max_tokens, "optimizer.max_tokens (ACE's curator)")
    return ResponseSchema(name="ace_curation", json_schema=schema), chars


def parse_operations(text: str | None, max_ops: int, chars: int | None = None) -> list[tuple[str, str]]:
    """(section, content) of each ADD, at most ``max_ops``; any other operation type is malformed."""
    obj = parse_json_object(text)
    raw = obj.get("operations")
    if not isinstance(raw, list):
        raise MalformedOutput("the object must have an 'operations' list")
    out = []
    for i, op in enumerate(raw[:max_ops]):
        if not isinstance(op, dict):
            raise MalformedOutput(f"operations[{i}] is not an object")
        if op.get("type") != "ADD":
            raise MalformedOutput(f"operations[{i}].type must be ADD, got {op.get('type')!r}")
        section, content = op.get("section"), op.get("content")
        if section not in SECTIONS:
            raise MalformedOutput(f"operations[{i}].section must be one of {', '.join(SECTIONS)}")
        if not isinstance(content, str) or not content.strip():
            raise MalformedOutput(f"operations[{i}].content must be a non-empty string")
        if chars is not None and too_long(content, chars):
            raise MalformedOutput(f"operations[{i}].content is longer than {chars} characters")
        out.append((section, one_line(content, 10_000)))
    return out


def curation_messages(
    playbook: Playbook, rollout: Rollout, label: bool, reflection: Reflection | None, settings: MethodSettings
) -> list[Message]:
    _, chars = curation_schema(settings)
    system = (
        with_role(_CURATE, assistant_role(settings.suite_name))
        .replace("{sections}", ", ".join(SECTIONS))
        .replace("{ops}", str(ace_params(settings).max_operations))
        .replace("{chars}", str(chars))
    )
    shown = (
        json.dumps({"reasoning": reflection.reasoning, "key_insight": reflection.key_insight})
        if reflection is not None
        else "(no reflection: the reflector's answer could not be used)"
    )
    user = f"{_playbook_block(playbook)}\n\nReflection: {shown}\n\n{trajectory_text(rollout, label, 1)}"
    return [Message(role="system", content=system), Message(role="user", content=user)]


# -- the deterministic merge -----------------------------------------------------------------------


class Merger:
    """Applies reflections and delta operations to a playbook; no model call, same inputs same result."""

    def __init__(self, playbook: Playbook, embedder: Embedder, threshold: float, cap: int) -> None:
        self.playbook = playbook
        self.embedder = embedder
        self.threshold = threshold
        self.cap = cap
        self._vectors: dict[str, list[float]] = {}
        self.log: dict[str, Any] = {
            "tags": {t: 0 for t in TAGS},
            "unknown_tag_ids": 0,
            "added": 0,
            "duplicates": [],
            "pruned": [],
        }

    def _vector(self, text: str) -> list[float]:
        if text not in self._vectors:
            self._vectors[text] = self.embedder.embed([text])[0]
        return self._vectors[text]

    def apply_tags(self, tags: list[tuple[str, str]]) -> None:
        by_id = {b.id: b for b in self.playbook.bullets}
        for bullet_id, tag in tags:
            bullet = by_id.get(bullet_id)
            if bullet is None:
                self.log["unknown_tag_ids"] += 1
                continue
            self.log["tags"][tag] += 1
            if tag == "helpful":
                bullet.helpful += 1
            elif tag == "harmful":
                bullet.harmful += 1

    def add(self, section: str, content: str, source: str) -> Bullet | None:
        """The new bullet, or None when it duplicates a kept one (recorded in ``log``)."""
        norm = content.casefold()
        vec = self._vector(content)
        for kept in self.playbook.bullets:
            sim = 1.0 if kept.content.casefold() == norm else cosine(vec, self._vector(kept.content))
            if sim >= self.threshold:
                self.log["duplicates"].append(
                    {"content": content, "duplicate_of": kept.id, "similarity": round(sim, 6)}
                )
                return None
        bullet = Bullet(
            id=f"{SECTIONS[section]}-{self.playbook.next_id:05d}",
            section=section,
            content=content,
            source=source,
        )
        self.playbook.next_id += 1
        self.playbook.bullets.append(bullet)
        self.log["added"] += 1
        self.refine()
        return bullet

    def refine(self) -> None:
        """Grow-and-refine: above the cap, drop the lowest helpful-minus-harmful bullet (ties: the oldest)."""
        while len(self.playbook.bullets) > self.cap:
            worst = min(
                enumerate(self.playbook.bullets), key=lambda ib: (ib[1].helpful - ib[1].harmful, ib[0])
            )[1]
            self.playbook.bullets.remove(worst)
            self.log["pruned"].append(worst.id)


def order(
    labelled: list[tuple[Rollout, bool]], seed: int, lineage: str, salt: str
) -> list[tuple[Rollout, bool]]:
    """The sequence a sequential method sees the trajectories in: by rollout id, shuffled with a seed
    derived from the lineage (the record's append order never matters)."""
    out = sorted(labelled, key=lambda p: p[0].rollout_id)
    random.Random(derive_seed(seed, lineage, salt)).shuffle(out)
    return out


async def evolve_playbook(inputs: EvolveInputs, playbook: Playbook) -> tuple[Playbook, dict[str, Any]]:
    settings, lineage, optimizer = inputs.settings, inputs.lineage, inputs.optimizer
    assert optimizer is not None
    p = ace_params(settings)
    r_schema, r_chars = reflection_schema(settings)
    c_schema, c_chars = curation_schema(settings)
    embedder = make_embedder(p.embedder)
    merger = Merger(playbook, embedder, p.dedup_threshold, p.max_bullets)
    failed_reflections: list[dict[str, Any]] = []
    failed_curations: list[dict[str, Any]] = []
    sequence = order(inputs.labelled, settings.seed, lineage, "ace-order")
    for step, (rollout, label) in enumerate(sequence):
        reflection, r_log = await call_structured(
            optimizer,
            reflection_messages(merger.playbook, rollout, label, settings, inputs.labeller),
            lambda t: parse_reflection(t, p.max_tags, r_chars),
            seed=lambda a, s=step: derive_seed(settings.seed, lineage, "ace-reflect", s, a),
            max_attempts=settings.methods_params.max_attempts,
            purpose=f"reflect/{rollout.instance_id}",
            schema=r_schema,
        )
        if reflection is None:
            failed_reflections.append(r_log.as_dict() | {"trajectory": rollout.rollout_id})
        else:
            merger.apply_tags(reflection.tags)
        ops, c_log = await call_structured(
            optimizer,
            curation_messages(merger.playbook, rollout, label, reflection, settings),
            lambda t: parse_operations(t, p.max_operations, c_chars),
            seed=lambda a, s=step: derive_seed(settings.seed, lineage, "ace-curate", s, a),
            max_attempts=settings.methods_params.max_attempts,
            purpose=f"curate/{rollout.instance_id}",
            schema=c_schema,
        )
        if ops is None:
            failed_curations.append(c_log.as_dict() | {"trajectory": rollout.rollout_id})
            continue
        for section, content in ops:
            merger.add(section, content, rollout.rollout_id)
    book = merger.playbook
    diag = {
        "prompt_version": PROMPT_VERSION,
        "embedder": embedder.describe(),
        "trajectories": len(sequence),
        "order": [r.rollout_id for r, _ in sequence],
        "bullets": len(book.bullets),
        "bullets_by_section": {s: sum(b.section == s for b in book.bullets) for s in SECTIONS},
        "bullets_added": merger.log["added"],
        "tags_applied": merger.log["tags"],
        "unknown_tag_ids": merger.log["unknown_tag_ids"],
        "duplicates_dropped": len(merger.log["duplicates"]),
        "duplicates": merger.log["duplicates"],
        "pruned": merger.log["pruned"],
        "failed_reflections": failed_reflections,
        "failed_curations": failed_curations,
        "n_failed_updates": len(failed_reflections) + len(failed_curations),
        # What the artifact holds after evolution, as the closing notes show it.
        "contents": [
            f"[{b.id}] +{b.helpful}/-{b.harmful} {one_line(b.content, 160)}" for b in book.bullets[:8]
        ],
    }
    return book, diag


def playbook_state(playbook: Playbook) -> dict[str, str]:
    return {
        STATE_FILE: render(playbook),
        DATA_FILE: json.dumps(playbook.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
    }


def playbook_placebo(playbook: Playbook, rng: random.Random) -> Playbook:
    """The same bullets (ids, sections, counters, order), each bullet's text replaced by neutral text of the
    same length; bullets with the same text get the same neutral text."""
    texts: dict[str, str] = {}
    bullets = []
    for b in playbook.bullets:
        key = b.content.casefold()
        if key not in texts:
            texts[key] = neutral_fit(len(b.content), rng) or "Plain words."
        bullets.append(b.model_copy(update={"content": texts[key], "source": ""}))
    return playbook.model_copy(update={"bullets": bullets})


class ACEMethod(MethodBase):
    """ACE as a ``Method``: the whole playbook in every episode (condition ``ace``); a later round continues
    the previous round's playbook."""

    name = "ace"
    state_file = STATE_FILE
    section = SECTION

    def check_budgets(self, settings: MethodSettings) -> None:
        reflection_schema(settings)
        curation_schema(settings)

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        if insertion != "literal":
            raise ValueError(f"ace: no insertion {insertion!r} (literal)")
        return Sections(playbook_sections(artifact_dir))

    def units(self, artifact_dir: Path) -> list[Unit]:
        """Each playbook bullet, with the acquisition rollout whose curation added it."""
        book = Playbook.model_validate_json((artifact_dir / DATA_FILE).read_text())
        return [Unit(b.id, "playbook bullet", b.content, b.source or None) for b in book.bullets]

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """The playbook's sections, ids and counters with neutral bullet texts of the same lengths, both
        files written so that ``playbook.md`` stays the rendering of ``playbook.json``."""
        real = Playbook.model_validate_json((real_dir / DATA_FILE).read_text())
        fake = playbook_placebo(real, rng)
        state = playbook_state(fake)
        extra = {"bullets": len(fake.bullets)}
        return PlaceboState(state, len(render(real)), len(state[STATE_FILE]), extra)

    def deployed_chars(self, artifact_dir: Path) -> int:
        """The rendered playbook (``playbook.md``), not its JSON data."""
        return len((artifact_dir / STATE_FILE).read_text())

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        return 0

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        start = Playbook()
        prior_bullets = 0
        if inputs.prior is not None:
            start = Playbook.model_validate_json((inputs.prior / DATA_FILE).read_text())
            prior_bullets = len(start.bullets)
        book, diag = await evolve_playbook(inputs, start)
        if inputs.prior is not None:
            diag["prior_bullets"] = prior_bullets
        return playbook_state(book), diag


ACE = ACEMethod()
