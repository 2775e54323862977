"""ReasoningBank (after google-research/reasoning-bank, re-implemented).

Distillation: every usable acquisition trajectory gives at most ``max_items`` memory items (title,
description, content), from successes and failures with separate prompts; each item keeps its provenance.
Retrieval: the past task *queries* are embedded (not the memory text); the current query is wrapped in an
instruction and embedded; cosine similarity picks the top-1 past task and all of its items are inserted
behind a fixed preamble. The embedder and the retrieval settings are frozen into the artifact.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evoaudit.answer_bounds import fit, too_long
from evoaudit.concurrency import gather_ordered
from evoaudit.config import EmbedderConfig, MethodSettings, MethodsParams
from evoaudit.methods.common import (
    CallLog,
    MalformedOutput,
    assistant_role,
    call_structured,
    parse_json_object,
    trajectory_text,
    with_role,
)
from evoaudit.methods.embed import Embedder, HashedNgramEmbedder, cosine, make_embedder
from evoaudit.methods.neutral import fit as neutral_fit
from evoaudit.methods.protocol import Deployed, EvolveInputs, MethodBase, PlaceboState, Unit
from evoaudit.models.base import ChatBackend, ResponseSchema
from evoaudit.records import Message, Rollout
from evoaudit.seeds import derive_seed

PROMPT_VERSION = "reasoningbank-distil-v1"
BANK_FILE = "bank.json"
VECTORS_FILE = "query_vectors.json"
SECTION = "Memory"
# Paraphrases the upstream framing: items from past interactions that may help; use them where relevant.
PREAMBLE = (
    "These memory items were gathered from past interactions with a request similar to the current one "
    "and may help with it. Draw on these past experiences where they apply."
)


class MemoryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    description: str
    content: str
    provenance: Literal["success", "failure"]


class BankEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry_id: str  # the acquisition rollout it was distilled from
    query: str
    family: str
    label: bool
    items: list[MemoryItem]


class Bank(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedder: EmbedderConfig
    query_instruction: str
    top_k: int
    preamble: str
    entries: list[BankEntry]


def wrap_query(instruction: str, query: str) -> str:
    return f"Instruct: {instruction}\nQuery: {query}"


# -- distillation ----------------------------------------------------------------------------------

_SYSTEM = {
    "success": """You write memory items for a {assistant_role} that works through tools. You are shown \
one trajectory of the assistant on a past request; {labeller} judged that it succeeded.

Distil at most {n} memory items: reusable strategies that explain why the approach worked and that would \
help on similar requests. Keep them general: no names, amounts, dates or identifiers from this request.""",
    "failure": """You write memory items for a {assistant_role} that works through tools. You are shown \
one trajectory of the assistant on a past request; {labeller} judged that it failed.

Distil at most {n} memory items: lessons on what went wrong and how to avoid it on similar requests. Keep \
them general: no names, amounts, dates or identifiers from this request.""",
}
_FORMAT = """

Reply with one JSON object {{"memories": [{{"title": "...", "description": "...", "content": "..."}}]}}: \
a title of a few words, a one-sentence description, and content of one to three sentences, each at most \
{chars} characters."""


def distil_messages(
    rollout: Rollout,
    label: bool,
    n: int,
    labeller: str = "checker",
    suite: str = "banking",
    chars: int = 300,
) -> list[Message]:
    """``labeller`` names what decided the label (checker or judge), as the distiller is told."""
    kind = "success" if label else "failure"
    who = {"checker": "an automatic checker", "judge": "an LLM judge"}[labeller]
    template = with_role(_SYSTEM[kind], assistant_role(suite))
    system = template.format(n=n, labeller=who) + _FORMAT.format(chars=chars)
    return [
        Message(role="system", content=system),
        Message(role="user", content=trajectory_text(rollout, label, 1)),
    ]


# The distiller's answer, as ``parse_items`` reads it (non-empty strings and the cap are its to check).
MEMORIES_SCHEMA = ResponseSchema(
    name="reasoningbank_memories",
    json_schema={
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "content": {"type": "string"},
                    },
                    "required": ["title", "description", "content"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["memories"],
        "additionalProperties": False,
    },
)


def memories_schema(settings: MethodSettings) -> tuple[ResponseSchema, int]:
    """At most ``max_items`` items whose strings are short enough that the fullest answer fits
    ``optimizer.max_tokens``; and that string bound."""
    base = json.loads(json.dumps(MEMORIES_SCHEMA.json_schema))
    base["properties"]["memories"]["maxItems"] = settings.methods_params.reasoningbank.max_items
    schema, chars = fit(
        base, settings.optimizer_max_tokens, "optimizer.max_tokens (ReasoningBank's distiller)"
    )
    return ResponseSchema(name=MEMORIES_SCHEMA.name, json_schema=schema), chars


def parse_items(
    text: str | None, max_items: int, provenance: Literal["success", "failure"], chars: int | None = None
) -> list[MemoryItem]:
    obj = parse_json_object(text)
    raw = obj.get("memories")
    if not isinstance(raw, list):
        raise MalformedOutput("the object must have a 'memories' list")
    items = []
    for i, item in enumerate(raw[:max_items]):
        if not isinstance(item, dict):
            raise MalformedOutput(f"memories[{i}] is not an object")
        fields = {}
        for key in ("title", "description", "content"):
            value = item.get(key)
            if not isinstance(value, str) or not value.strip():
                raise MalformedOutput(f"memories[{i}].{key} must be a non-empty string")
            if chars is not None and too_long(value, chars):
                raise MalformedOutput(f"memories[{i}].{key} is longer than {chars} characters")
            fields[key] = value.strip()
        items.append(MemoryItem(**fields, provenance=provenance))
    return items


async def build_bank(
    settings: MethodSettings,
    lineage: str,
    labelled: list[tuple[Rollout, bool]],
    optimizer: ChatBackend,
    labeller: str = "checker",
) -> tuple[Bank, list[list[float]], dict[str, Any]]:
    p = settings.methods_params.reasoningbank
    schema, chars = memories_schema(settings)

    async def distil(pair: tuple[Rollout, bool]) -> tuple[list[MemoryItem] | None, CallLog]:
        rollout, label = pair
        prov: Literal["success", "failure"] = "success" if label else "failure"
        return await call_structured(
            optimizer,
            distil_messages(rollout, label, p.max_items, labeller, settings.suite_name, chars),
            lambda t: parse_items(t, p.max_items, prov, chars),
            seed=lambda a: derive_seed(settings.seed, lineage, rollout.instance_id, "distil", a),
            max_attempts=settings.methods_params.max_attempts,
            purpose=f"distil/{rollout.instance_id}",
            schema=schema,
        )

    # Each trajectory is distilled on its own: ask all at once, build the bank in input order.
    answers = await gather_ordered(distil, labelled, settings.optimizer_concurrency)
    entries: list[BankEntry] = []
    failed: list[dict[str, Any]] = []
    for (rollout, label), (items, call_log) in zip(labelled, answers, strict=True):
        if items is None:
            failed.append(call_log.as_dict() | {"trajectory": rollout.rollout_id})
            continue
        entries.append(
            BankEntry(
                entry_id=rollout.rollout_id,
                query=next((m.content or "" for m in rollout.messages if m.role == "user"), ""),
                family=rollout.family,
                label=label,
                items=items,
            )
        )
    bank = Bank(
        embedder=p.embedder,
        query_instruction=p.query_instruction,
        top_k=p.top_k,
        preamble=PREAMBLE,
        entries=entries,
    )
    embedder = make_embedder(p.embedder)
    vectors = embedder.embed([e.query for e in entries]) if entries else []
    items = [i for e in entries for i in e.items]
    diagnostics = {
        "prompt_version": PROMPT_VERSION,
        "embedder": embedder.describe(),
        "trajectories": len(labelled),
        "entries": len(entries),
        "items": len(items),
        "items_from_failures": sum(i.provenance == "failure" for i in items),
        "items_from_successes": sum(i.provenance == "success" for i in items),
        "entries_from_failures": sum(not e.label for e in entries),
        "failed_distillations": failed,
        "n_failed_distillations": len(failed),
    }
    return bank, vectors, diagnostics


def extend_bank(prior: Path, bank: Bank, vectors: list[list[float]]) -> tuple[Bank, list[list[float]], int]:
    """The previous round's bank (artifact directory ``prior``) with ``bank``'s entries appended, their
    query vectors in the same order, and how many entries came from ``prior``."""
    old = Bank.model_validate_json((prior / BANK_FILE).read_text())
    old_vectors = json.loads((prior / VECTORS_FILE).read_text())
    for name in ("embedder", "query_instruction"):  # what the stored query vectors were made with
        if getattr(old, name) != getattr(bank, name):
            raise ValueError(
                f"{prior}: the previous round's bank has {name} {getattr(old, name)!r}, this round's "
                f"{getattr(bank, name)!r}; methods_params.reasoningbank.{name} must not change between rounds"
            )
    merged = bank.model_copy(update={"entries": [*old.entries, *bank.entries]})
    return merged, [*old_vectors, *vectors], len(old.entries)


def bank_state(bank: Bank, vectors: list[list[float]]) -> dict[str, str]:
    return {
        BANK_FILE: json.dumps(bank.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
        VECTORS_FILE: json.dumps(vectors, separators=(",", ":")) + "\n",
    }


# -- retrieval -------------------------------------------------------------------------------------


def top_entries(bank: Bank, vectors: list[list[float]], query_vector: list[float]) -> list[tuple[int, float]]:
    """Indices of the top-k past tasks by cosine similarity; ties go to the earlier entry."""
    scored = [(i, cosine(v, query_vector)) for i, v in enumerate(vectors)]
    scored.sort(key=lambda x: (-round(x[1], 12), x[0]))
    return scored[: bank.top_k]


class Retriever:
    """Loaded once per evaluation job; ``sections(query)`` is called per episode."""

    def __init__(self, artifact_dir: Path) -> None:
        self.bank = Bank.model_validate_json((artifact_dir / BANK_FILE).read_text())
        self.vectors = json.loads((artifact_dir / VECTORS_FILE).read_text())
        self.embedder = make_embedder(self.bank.embedder)
        self._vectors: dict[str, list[float]] = {}  # a query repeats across variants and goals

    def retrieve(self, query: str) -> list[tuple[BankEntry, float]]:
        if not self.bank.entries:
            return []
        if query not in self._vectors:
            self._vectors[query] = _embed_one(self.embedder, wrap_query(self.bank.query_instruction, query))
        qv = self._vectors[query]
        return [(self.bank.entries[i], s) for i, s in top_entries(self.bank, self.vectors, qv)]

    def sections(self, query: str) -> list[tuple[str, str]]:
        items = [item for entry, _ in self.retrieve(query) for item in entry.items]
        if not items:
            return []
        body = "\n\n".join(f"### {i.title}\n{i.description}\n\n{i.content}" for i in items)
        return [(SECTION, f"{self.bank.preamble}\n\n{body}")]


def _embed_one(embedder: Embedder, text: str) -> list[float]:
    # The local embedder is pure, so a query repeated across episodes (variants, goals) is embedded once.
    if isinstance(embedder, HashedNgramEmbedder):
        return list(_embed_local(embedder.dims, text))
    return embedder.embed([text])[0]


@cache
def _embed_local(dims: int, text: str) -> tuple[float, ...]:
    return tuple(HashedNgramEmbedder(dims).embed([text])[0])


def bank_placebo(bank: Bank, rng: random.Random) -> Bank:
    """The same entries and queries (so retrieval picks the same past task), each item's title,
    description and content replaced by neutral text of the same length."""
    entries = []
    for e in bank.entries:
        items = [
            MemoryItem(
                title=neutral_fit(len(i.title), rng, sentences=False).capitalize() or "Note",
                description=neutral_fit(len(i.description), rng),
                content=neutral_fit(len(i.content), rng),
                provenance=i.provenance,
            )
            for i in e.items
        ]
        entries.append(e.model_copy(update={"items": items}))
    return bank.model_copy(update={"entries": entries})


def bank_chars(bank: Bank) -> int:
    return sum(len(i.title) + len(i.description) + len(i.content) for e in bank.entries for i in e.items)


class RetrievedMemory:
    """A bank as it enters the executor: the items of the past tasks most similar to each episode's task."""

    per_query = True

    def __init__(self, artifact_dir: Path) -> None:
        self.artifact_dir = artifact_dir
        bank = Bank.model_validate_json((artifact_dir / BANK_FILE).read_text())
        # Re-embedding a query with an endpoint embedder would call the endpoint again.
        self.retraceable = bank.embedder.backend == "local"
        self._retriever: Retriever | None = None

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = Retriever(self.artifact_dir)
        return self._retriever

    def sections(self, query: str | None) -> list[tuple[str, str]]:
        if query is None:
            raise ValueError("reasoningbank retrieves per task: a query is required")
        return self.retriever.sections(query)

    def retrieval(self, query: str) -> dict[str, Any] | None:
        hits = self.retriever.retrieve(query)
        return {
            "entries": [e.entry_id for e, _ in hits],
            "families": [e.family for e, _ in hits],
            "similarity": [round(s, 6) for _, s in hits],
            "provenance": [i.provenance for e, _ in hits for i in e.items],
        }


class ReasoningBankMethod(MethodBase):
    """ReasoningBank as a ``Method``: a later round adds its entries to the previous round's bank."""

    name = "reasoningbank"
    learns = True
    retrieves = True

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        return RetrievedMemory(artifact_dir)

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """The same entries and query vectors, each item's text neutral and of the same length."""
        bank = Bank.model_validate_json((real_dir / BANK_FILE).read_text())
        fake = bank_placebo(bank, rng)
        vectors = json.loads((real_dir / VECTORS_FILE).read_text())
        extra = {"items": sum(len(e.items) for e in fake.entries)}
        return PlaceboState(bank_state(fake, vectors), bank_chars(bank), bank_chars(fake), extra)

    def deployed_chars(self, artifact_dir: Path) -> int:
        """The text of the memory items, not the query vectors."""
        return bank_chars(Bank.model_validate_json((artifact_dir / BANK_FILE).read_text()))

    def units(self, artifact_dir: Path) -> list[Unit]:
        """Each memory item (title, description and content), with the rollout it was distilled from."""
        bank = Bank.model_validate_json((artifact_dir / BANK_FILE).read_text())
        return [
            Unit(f"{BANK_FILE}:{n}.{k}", "memory item", f"{i.title}. {i.description} {i.content}", e.entry_id)
            for n, e in enumerate(bank.entries)
            for k, i in enumerate(e.items)
        ]

    def success_label(self, params: MethodsParams) -> str:
        # Its own key (default judge, as upstream), not methods_params.success_label.
        return params.reasoningbank.success_label

    def check_budgets(self, settings: MethodSettings) -> None:
        memories_schema(settings)

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        bank, vectors, diag = await build_bank(
            inputs.settings, inputs.lineage, inputs.labelled, inputs.optimizer, inputs.labeller
        )
        if inputs.prior is not None:
            bank, vectors, diag["prior_entries"] = extend_bank(inputs.prior, bank, vectors)
        return bank_state(bank, vectors), diag


REASONINGBANK = ReasoningBankMethod()
