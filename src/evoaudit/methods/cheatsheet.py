"""Dynamic Cheatsheet (after suzgunmirac/dynamic-cheatsheet and Suzgun et al., "Dynamic Cheatsheet:
Test-Time Learning with Adaptive Memory", arXiv:2504.07952; re-implemented, no code or prompt text copied).

Two variants, two methods:

- ``dc-cu`` (DC-Cumulative): one cheatsheet, rewritten whole by a *curator* call after each labelled
  acquisition trajectory, in an order drawn with a derived seed; the curator sees the current cheatsheet and
  the trajectory and answers the next cheatsheet, at most ``max_chars`` characters. A malformed answer that
  stays malformed keeps the previous cheatsheet (as upstream keeps the old one when no new one is found).
  The final cheatsheet (``cheatsheet.md``) is inserted whole into every episode's system prompt.
- ``dc-rs`` (DC-Retrieval & Synthesis): one entry per trajectory, in the same kind of seeded order. For
  each, the top-k most similar *earlier* entries are retrieved by cosine similarity of their task queries
  (``methods.embed``), and the curator synthesises the entry's note from those entries' notes and the new
  trajectory. At deployment (per episode, like ReasoningBank) the episode's request is embedded, the top-k
  most similar entries are retrieved (``retrieve``) and their notes are synthesised into one cheatsheet
  (``synthesise``): lines in similarity order, each line once, cut at ``max_chars``.

Fidelity choices:

- Offline adaptation: upstream DC learns at test time, its generator answering each test input and the
  curator updating from that answer. The audit evolves offline from the lineage's labelled acquisition
  record (the matched-acquisition design every method shares); the curator sees a trajectory with its
  outcome instead of a fresh answer, and the cheatsheet is frozen before any evaluation episode.
- DC-RS synthesis: upstream asks the curator once per *test* input to synthesise a cheatsheet from the
  retrieved past input/output pairs. A frozen artifact cannot call a model during evaluation, so the model
  synthesis happens offline, once per acquisition entry (from its retrieved predecessors); the
  deployment-time synthesis over the retrieved entries is deterministic code.
- Retrieval embeds the raw task queries (upstream embeds the raw inputs), with the local hashed embedder by
  default; ties go to the earlier entry.
- Upstream's curator keeps usage counters in the cheatsheet's own text; they are the curator's to write and
  are not checked here. The answer is a JSON object ``{"cheatsheet": "..."}`` with a bounded string instead
  of upstream's tagged free text, so that a structured-output endpoint can close it in time.

Simulator (``models.sim.roles``): its curator keeps the lines it is shown, adds one line for the trajectory
(for a failure the guidance of its diagnosis, e.g. "Before sending money, ... look up the recent transaction
history ..."; for a success "Check the recent transactions with <reads> before calling <writes> ..."), counts
repeated lines ("(seen N)"), and drops the least-seen lines (oldest first) beyond the stated length: so the
cumulative cheatsheet depends on the order the seed draws. Planted effect: an evolved cheatsheet (and, for
DC-RS, a retrieved note) carries read-before-write guidance, which the executor simulator's
``inspect_history`` cue turns into a higher ``read_propensity``; for DC-RS only episodes whose nearest past
requests carried it are moved.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from evoaudit.answer_bounds import fit, too_long
from evoaudit.config import DynamicCheatsheetParams, EmbedderConfig, MethodSettings, MethodsParams
from evoaudit.methods.ace import order
from evoaudit.methods.common import (
    MalformedOutput,
    assistant_role,
    call_structured,
    one_line,
    parse_json_object,
    task_query,
    trajectory_text,
    with_role,
)
from evoaudit.methods.embed import cosine, make_embedder
from evoaudit.methods.neutral import fit as neutral_fit
from evoaudit.methods.protocol import Deployed, EvolveInputs, MethodBase, PlaceboState, Sections, Unit
from evoaudit.models.base import ResponseSchema
from evoaudit.records import Message, Rollout
from evoaudit.seeds import derive_seed

PROMPT_VERSION = "dynamic-cheatsheet-v1"
STATE_FILE = "cheatsheet.md"
ENTRIES_FILE = "entries.json"
VECTORS_FILE = "query_vectors.json"
SECTION = "Cheatsheet"
PREAMBLE = (
    "This cheatsheet was written from earlier requests. It may contain mistakes: check each hint against "
    "the current request before relying on it."
)
RS_PREAMBLE = (
    "These notes were written for earlier requests most similar to the current one. They may not fit it: "
    "check each hint against the current request before relying on it."
)


# The parameters' model lives with the configuration; its former name is kept for callers.
CheatsheetParams = DynamicCheatsheetParams


def dc_params(settings: MethodSettings) -> DynamicCheatsheetParams:
    """``methods_params.dynamic_cheatsheet``."""
    return settings.methods_params.dynamic_cheatsheet


# -- the curator -----------------------------------------------------------------------------------

# Paraphrases the curator's brief of upstream DC: keep what generalises, drop the trivial, fold in lessons.
_CUMULATIVE = """You curate a cheatsheet for a {assistant_role} that works through tools: a compact, \
evolving set of reusable strategies, pitfalls and checks. You see the current cheatsheet and one more \
trajectory with its outcome.

Answer the whole next cheatsheet: keep what still generalises, fold in what this trajectory teaches \
(what to repeat after a success, what to avoid after a failure), merge repeats, drop what is trivial or \
belongs to one request (no names, amounts, dates or identifiers). Reply with one JSON object \
{"cheatsheet": "..."}; the cheatsheet is at most {chars} characters."""

_SYNTHESIS = """You curate a cheatsheet for a {assistant_role} that works through tools, one note per \
request. You see the notes kept for the most similar earlier requests and one more trajectory with its \
outcome.

Synthesise this request's note: the strategies, pitfalls and checks from the earlier notes that apply to it, \
and what this trajectory teaches, each stated once and generally (no names, amounts, dates or identifiers). \
Reply with one JSON object {"cheatsheet": "..."}; the note is at most {chars} characters."""

CHEATSHEET_SCHEMA = {
    "type": "object",
    "properties": {"cheatsheet": {"type": "string"}},
    "required": ["cheatsheet"],
    "additionalProperties": False,
}


def cheatsheet_schema(settings: MethodSettings) -> tuple[ResponseSchema, int]:
    """The curator's schema with the cheatsheet bounded to ``max_chars``; refused when
    ``optimizer.max_tokens`` cannot hold a cheatsheet of that length."""
    p = dc_params(settings)
    where = "optimizer.max_tokens (Dynamic Cheatsheet's curator)"
    _, room = fit(CHEATSHEET_SCHEMA, settings.optimizer_max_tokens, where)
    if room < p.max_chars:
        raise ValueError(
            f"{where}: {settings.optimizer_max_tokens} tokens hold a cheatsheet of {room} characters, but "
            f"methods_params.dynamic_cheatsheet.max_chars is {p.max_chars}; raise optimizer.max_tokens or "
            "lower max_chars"
        )
    schema = json.loads(json.dumps(CHEATSHEET_SCHEMA))
    schema["properties"]["cheatsheet"]["maxLength"] = p.max_chars
    return ResponseSchema(name="dynamic_cheatsheet", json_schema=schema), p.max_chars


def parse_cheatsheet(text: str | None, chars: int) -> str:
    value = parse_json_object(text).get("cheatsheet")
    if not isinstance(value, str) or not value.strip():
        raise MalformedOutput("'cheatsheet' must be a non-empty string")
    if too_long(value.strip(), chars):
        raise MalformedOutput(f"'cheatsheet' is longer than {chars} characters")
    return value.strip() + "\n"


def _block(title: str, text: str) -> str:
    return f"{title}:\n<<<\n{text.rstrip() or '(empty)'}\n>>>"


def cumulative_messages(
    cheatsheet: str, rollout: Rollout, label: bool, settings: MethodSettings
) -> list[Message]:
    _, chars = cheatsheet_schema(settings)
    system = with_role(_CUMULATIVE, assistant_role(settings.suite_name)).replace("{chars}", str(chars))
    user = f"{_block('Current cheatsheet', cheatsheet)}\n\n{trajectory_text(rollout, label, 1)}"
    return [Message(role="system", content=system), Message(role="user", content=user)]


def synthesis_messages(
    notes: list[str], rollout: Rollout, label: bool, settings: MethodSettings
) -> list[Message]:
    _, chars = cheatsheet_schema(settings)
    system = with_role(_SYNTHESIS, assistant_role(settings.suite_name)).replace("{chars}", str(chars))
    shown = "\n\n".join(n.rstrip() for n in notes)
    user = f"{_block('Notes of similar earlier requests', shown)}\n\n{trajectory_text(rollout, label, 1)}"
    return [Message(role="system", content=system), Message(role="user", content=user)]


async def _curate(
    inputs: EvolveInputs, messages: list[Message], step: int, rollout: Rollout, salt: str
) -> tuple[str | None, dict[str, Any]]:
    settings = inputs.settings
    assert inputs.optimizer is not None
    schema, chars = cheatsheet_schema(settings)
    value, log = await call_structured(
        inputs.optimizer,
        messages,
        lambda t: parse_cheatsheet(t, chars),
        seed=lambda a: derive_seed(settings.seed, inputs.lineage, salt, step, a),
        max_attempts=settings.methods_params.max_attempts,
        purpose=f"curate/{rollout.instance_id}",
        schema=schema,
    )
    return value, log.as_dict() | {"trajectory": rollout.rollout_id}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


_MARKER = re.compile(r"^(\s*(?:#{1,6} |[-*+] |\d+[.)] |> )?)(.*)$")


def note_placebo(real: str, rng: random.Random, texts: dict[str, str]) -> str:
    """``real`` line by line: each line's Markdown marker kept and its text replaced by neutral text of the
    same length, blank lines kept. ``texts`` maps a line (case-folded) to its neutral text, shared across
    the notes of one artifact, so that lines repeated in the real notes repeat in the placebo and the
    deployment-time synthesis drops the same lines."""
    out = []
    for line in real.split("\n"):
        marker, body = _MARKER.match(line).groups()  # type: ignore[union-attr]
        if not body.strip():
            out.append(line)
            continue
        key = line.strip().casefold()
        if key not in texts:
            texts[key] = neutral_fit(len(body), rng) or "Plain words."
        out.append(marker + texts[key])
    return "\n".join(out)


# -- DC-Cu -----------------------------------------------------------------------------------------


class CumulativeCheatsheet(MethodBase):
    """DC-Cu as a ``Method``: the whole cheatsheet in every episode (condition ``dc-cu``); a later round
    continues the previous round's cheatsheet."""

    name = "dc-cu"
    state_file = STATE_FILE
    section = SECTION
    unit_kind = "cheatsheet line"

    def check_budgets(self, settings: MethodSettings) -> None:
        cheatsheet_schema(settings)

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        if insertion != "literal":
            raise ValueError(f"dc-cu: no insertion {insertion!r} (literal)")
        return Sections(cheatsheet_sections(artifact_dir))

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """Line by line: each line's Markdown marker kept and its text neutral, of the same length."""
        real = (real_dir / STATE_FILE).read_text()
        fake = note_placebo(real, rng, {})
        return PlaceboState({STATE_FILE: fake}, len(real), len(fake), {"lines": len(_lines(fake))})

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        return 0

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        sheet = ""
        if inputs.prior is not None:
            sheet = (inputs.prior / STATE_FILE).read_text()
        prior_chars = len(sheet)
        sequence = order(inputs.labelled, inputs.settings.seed, inputs.lineage, "dc-cu-order")
        failed, updates = [], 0
        for step, (rollout, label) in enumerate(sequence):
            new, log = await _curate(
                inputs,
                cumulative_messages(sheet, rollout, label, inputs.settings),
                step,
                rollout,
                "dc-cu-curate",
            )
            if new is None:
                failed.append(log)  # the previous cheatsheet is kept
                continue
            updates += new != sheet
            sheet = new
        diag: dict[str, Any] = {
            "prompt_version": PROMPT_VERSION,
            "variant": "cumulative",
            "trajectories": len(sequence),
            "order": [r.rollout_id for r, _ in sequence],
            "updates": updates,
            "failed_updates": failed,
            "n_failed_updates": len(failed),
            "chars": len(sheet),
            "lines": len(_lines(sheet)),
            "contents": [one_line(line, 160) for line in _lines(sheet)[:8]],
        }
        if inputs.prior is not None:
            diag["prior_chars"] = prior_chars
        return {STATE_FILE: sheet}, diag


def cheatsheet_sections(artifact_dir: Path) -> list[tuple[str, str]]:
    """The (heading, body) section a DC-Cu artifact adds to every episode's system prompt."""
    text = (artifact_dir / STATE_FILE).read_text()
    return [(SECTION, f"{PREAMBLE}\n\n{text}")] if text.strip() else []


# -- DC-RS -----------------------------------------------------------------------------------------


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry_id: str  # the acquisition rollout it was written from
    query: str
    family: str
    label: bool
    note: str
    # The earlier entries whose notes the curator was shown.
    retrieved: list[str] = []


class Entries(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedder: EmbedderConfig
    top_k: int
    max_chars: int
    preamble: str
    entries: list[Entry]


def retrieve(vectors: list[list[float]], query_vector: list[float], top_k: int) -> list[tuple[int, float]]:
    """Indices of the ``top_k`` entries most similar to ``query_vector`` (cosine); ties to the earlier one."""
    scored = [(i, cosine(v, query_vector)) for i, v in enumerate(vectors)]
    scored.sort(key=lambda x: (-round(x[1], 12), x[0]))
    return scored[:top_k]


def synthesise(notes: list[str], max_chars: int) -> str:
    """The deployment-time synthesis of retrieved notes (most similar first): each line once, in order,
    the text cut before the first line that would pass ``max_chars``."""
    kept: list[str] = []
    seen: set[str] = set()
    for note in notes:
        for line in _lines(note):
            key = line.strip().casefold()
            if key in seen:
                continue
            if len("\n".join([*kept, line])) > max_chars:
                return "\n".join(kept) + ("\n" if kept else "")
            seen.add(key)
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept else "")


def rs_sections_for(
    data: Entries, vectors: list[list[float]], query_vector: list[float]
) -> tuple[list[tuple[str, str]], list[tuple[Entry, float]]]:
    """A pure function of the frozen entries and the episode's query vector: the (heading, body) sections
    to insert and the entries retrieved with their similarity."""
    hits = [(data.entries[i], s) for i, s in retrieve(vectors, query_vector, data.top_k)]
    body = synthesise([e.note for e, _ in hits], data.max_chars)
    return ([(SECTION, f"{data.preamble}\n\n{body}")] if body else []), hits


class RSRetriever:
    """Loaded once per evaluation job; ``sections(query)`` and ``retrieval(query)`` per episode."""

    def __init__(self, artifact_dir: Path) -> None:
        self.data = Entries.model_validate_json((artifact_dir / ENTRIES_FILE).read_text())
        self.vectors = json.loads((artifact_dir / VECTORS_FILE).read_text())
        if len(self.vectors) != len(self.data.entries):
            raise ValueError(
                f"{artifact_dir}: {VECTORS_FILE} has {len(self.vectors)} vectors for "
                f"{len(self.data.entries)} entries; re-evolve the artifact"
            )
        self.embedder = make_embedder(self.data.embedder)
        self._vectors: dict[str, list[float]] = {}

    def _query_vector(self, query: str) -> list[float]:
        if query not in self._vectors:
            self._vectors[query] = self.embedder.embed([query])[0]
        return self._vectors[query]

    def _run(self, query: str) -> tuple[list[tuple[str, str]], list[tuple[Entry, float]]]:
        if not self.data.entries:
            return [], []
        return rs_sections_for(self.data, self.vectors, self._query_vector(query))

    def sections(self, query: str) -> list[tuple[str, str]]:
        return self._run(query)[0]

    def retrieval(self, query: str) -> dict[str, Any]:
        hits = self._run(query)[1]
        return {
            "entries": [e.entry_id for e, _ in hits],
            "families": [e.family for e, _ in hits],
            "similarity": [round(s, 6) for _, s in hits],
            "provenance": ["success" if e.label else "failure" for e, _ in hits],
        }


class RetrievedCheatsheet:
    """DC-RS entries as they enter the executor: each episode's request retrieves the top-k most similar
    entries, whose notes are synthesised into its cheatsheet; what it retrieved is recorded per episode."""

    per_query = True

    def __init__(self, artifact_dir: Path) -> None:
        self.artifact_dir = artifact_dir
        data = Entries.model_validate_json((artifact_dir / ENTRIES_FILE).read_text())
        # Re-embedding a query with an endpoint embedder would call the endpoint again.
        self.retraceable = data.embedder.backend == "local"
        self._retriever: RSRetriever | None = None

    @property
    def retriever(self) -> RSRetriever:
        if self._retriever is None:
            self._retriever = RSRetriever(self.artifact_dir)
        return self._retriever

    def sections(self, query: str | None) -> list[tuple[str, str]]:
        if query is None:
            raise ValueError("dc-rs retrieves per task: a query is required")
        return self.retriever.sections(query)

    def retrieval(self, query: str) -> dict[str, Any] | None:
        return self.retriever.retrieval(query)


def entries_placebo(data: Entries, rng: random.Random) -> Entries:
    """The same entries, queries and retrieval links (so retrieval picks the same entries), each note's
    lines replaced by neutral text of the same length; a line repeated across notes repeats in the
    placebo."""
    texts: dict[str, str] = {}
    entries = [e.model_copy(update={"note": note_placebo(e.note, rng, texts)}) for e in data.entries]
    return data.model_copy(update={"entries": entries})


def notes_chars(data: Entries) -> int:
    return sum(len(e.note) for e in data.entries)


class RetrievalSynthesisCheatsheet(MethodBase):
    """DC-RS as a ``Method``: per-episode retrieval and synthesis (condition ``dc-rs``); a later round adds
    its entries to the previous round's."""

    name = "dc-rs"
    retrieves = True

    def check_budgets(self, settings: MethodSettings) -> None:
        cheatsheet_schema(settings)

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        if insertion != "literal":
            raise ValueError(f"dc-rs: no insertion {insertion!r} (literal)")
        return RetrievedCheatsheet(artifact_dir)

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """The same entries, queries and query vectors, each note neutral with the same lines' lengths."""
        data = Entries.model_validate_json((real_dir / ENTRIES_FILE).read_text())
        fake = entries_placebo(data, rng)
        vectors = json.loads((real_dir / VECTORS_FILE).read_text())
        extra = {"entries": len(fake.entries)}
        return PlaceboState(rs_state(fake, vectors), notes_chars(data), notes_chars(fake), extra)

    def deployed_chars(self, artifact_dir: Path) -> int:
        """The entries' notes, not the queries or their vectors."""
        return notes_chars(Entries.model_validate_json((artifact_dir / ENTRIES_FILE).read_text()))

    def units(self, artifact_dir: Path) -> list[Unit]:
        """Each entry's note, with the acquisition rollout it was written from."""
        data = Entries.model_validate_json((artifact_dir / ENTRIES_FILE).read_text())
        return [
            Unit(f"{ENTRIES_FILE}:{n}", "cheatsheet entry", e.note, e.entry_id)
            for n, e in enumerate(data.entries)
        ]

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        return 0

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        settings = inputs.settings
        p = dc_params(settings)
        embedder = make_embedder(p.embedder)
        entries: list[Entry] = []
        vectors: list[list[float]] = []
        if inputs.prior is not None:
            old = Entries.model_validate_json((inputs.prior / ENTRIES_FILE).read_text())
            if old.embedder != p.embedder:
                raise ValueError(
                    f"{inputs.prior}: the previous round's entries were embedded with {old.embedder!r}; "
                    "methods_params.dynamic_cheatsheet.embedder must not change between rounds"
                )
            entries = list(old.entries)
            vectors = json.loads((inputs.prior / VECTORS_FILE).read_text())
        prior_entries = len(entries)
        sequence = order(inputs.labelled, settings.seed, inputs.lineage, "dc-rs-order")
        failed = []
        for step, (rollout, label) in enumerate(sequence):
            query = task_query(rollout)
            qv = embedder.embed([query])[0]
            hits = retrieve(vectors, qv, p.top_k) if entries else []
            shown = [entries[i] for i, _ in hits]
            messages = synthesis_messages([e.note for e in shown], rollout, label, settings)
            note, log = await _curate(inputs, messages, step, rollout, "dc-rs-curate")
            if note is None:
                failed.append(log)  # no entry: nothing was synthesised for this request
                continue
            entries.append(
                Entry(
                    entry_id=rollout.rollout_id,
                    query=query,
                    family=rollout.family,
                    label=label,
                    note=note,
                    retrieved=[e.entry_id for e in shown],
                )
            )
            vectors.append(qv)
        data = Entries(
            embedder=p.embedder, top_k=p.top_k, max_chars=p.max_chars, preamble=RS_PREAMBLE, entries=entries
        )
        lines = [line for e in entries for line in _lines(e.note)]
        diag: dict[str, Any] = {
            "prompt_version": PROMPT_VERSION,
            "variant": "retrieval-synthesis",
            "embedder": embedder.describe(),
            "top_k": p.top_k,
            "trajectories": len(sequence),
            "order": [r.rollout_id for r, _ in sequence],
            "entries": len(entries),
            "entries_from_failures": sum(not e.label for e in entries),
            "failed_updates": failed,
            "n_failed_updates": len(failed),
            "distinct_lines": len({line.strip().casefold() for line in lines}),
            # The most widely shared note lines, each with how many entries carry it.
            "contents": [
                f"{n} entries: {one_line(line, 240)}"
                for line, n in sorted(Counter(lines).items(), key=lambda x: (-x[1], lines.index(x[0])))[:8]
            ],
        }
        if inputs.prior is not None:
            diag["prior_entries"] = prior_entries
        return rs_state(data, vectors), diag


def rs_state(data: Entries, vectors: list[list[float]]) -> dict[str, str]:
    return {
        ENTRIES_FILE: json.dumps(data.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
        VECTORS_FILE: json.dumps(vectors, separators=(",", ":")) + "\n",
    }


DC_CU = CumulativeCheatsheet()
DC_RS = RetrievalSynthesisCheatsheet()
