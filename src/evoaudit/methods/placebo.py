"""Placebos: task-irrelevant state with the structure, size and insertion or retrieval position of a
method's real artifact. A placebo contrast separates what the learned content does from what merely adding
text of that shape to the prompt does. The realised length ratio placebo/real is recorded.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from evoaudit.hashing import sha256_file
from evoaudit.methods import awm, reasoningbank, skillopt
from evoaudit.methods.artifact import ArtifactMeta, clear_artifact, read_meta, write_artifact
from evoaudit.seeds import derive_seed

# Neutral sentences about tidy writing: no banking terms, tool names, or advice about how to act.
_POOL = (
    "Short paragraphs are easier to follow than long ones.",
    "A heading should describe what the text below it covers.",
    "Lists work well when the items are parallel in form.",
    "Plain words usually serve better than elaborate ones.",
    "One idea per sentence keeps the meaning clear.",
    "Consistent spelling of a term avoids confusion later.",
    "A summary at the end can restate the main point briefly.",
    "Active voice often makes a sentence shorter and clearer.",
    "Examples help when an abstract point is hard to picture.",
    "Transitions between sections help the text flow.",
    "Titles in sentence case look calm and uniform.",
    "White space around blocks of text rests the eye.",
    "A glossary helps when a document uses special vocabulary.",
    "Quotations should be marked clearly and kept exact.",
    "Numbered lists suit sequences, bullets suit sets.",
    "The first sentence of a paragraph can announce its topic.",
)
_WORDS = tuple(w for s in _POOL for w in s.rstrip(".").lower().split())
_TITLES = ("Clear layout", "Plain style", "Tidy lists", "Calm headings", "Readable notes", "Even spacing")
_PSEUDO_ACTIONS = ("open_page(name={page})", "format_text(style={style})", "save_page(name={page})")


def fit(target: int, rng: random.Random, sentences: bool = True) -> str:
    """Neutral text of about ``target`` characters (never shorter by more than one word)."""
    if target <= 0:
        return ""
    parts: list[str] = []
    pool = list(_POOL if sentences else _WORDS)
    rng.shuffle(pool)
    i = 0
    while len(" ".join(parts)) < target:
        parts.append(pool[i % len(pool)])
        i += 1
    text = " ".join(parts)
    # Trim whole words back to the closest length to the target.
    while len(text) > target and " " in text:
        shorter = text.rsplit(" ", 1)[0]
        if abs(len(shorter) - target) >= abs(len(text) - target):
            break
        text = shorter
    return text


def skill_placebo(real: str, rng: random.Random) -> str:
    """A Markdown document shaped like the real skill: its title, then neutral bullets of matched size."""
    lines = real.splitlines()
    title = next((ln for ln in lines if ln.startswith("# ")), "# Notes")
    body_len = max(0, len(real) - len(title) - 2)
    bullets = []
    used = 0
    while used < body_len - 4:
        line = "- " + fit(min(120, body_len - used - 3), rng)
        bullets.append(line)
        used += len(line) + 1
    return title + "\n\n" + "\n".join(bullets) + "\n"


_WF_STEP = re.compile(r"<think>(.*?)</think>(\s*)<action>(.*?)</action>", re.DOTALL)


def workflow_placebo(real: str, rng: random.Random) -> str:
    """Same number of workflows and steps, same envelopes, task-irrelevant content of matched length."""
    blocks = [b for b in re.split(r"(?m)^(?=## )", real) if b.strip().startswith("## ")]
    out = []
    for b in blocks:
        heading, _, rest = b.partition("\n")
        first_step = rest.find("<think>")
        intro = rest[:first_step].strip() if first_step != -1 else rest.strip()
        parts = [f"## {rng.choice(_TITLES)}", fit(len(intro), rng)]
        for thought, space, action in _WF_STEP.findall(rest):
            pseudo = rng.choice(_PSEUDO_ACTIONS)
            think_len = max(10, len(thought) + len(action) - len(pseudo))
            parts.append(f"<think>{fit(think_len, rng)}</think>{space or chr(10)}<action>{pseudo}</action>")
        out.append("\n".join(parts))
    return "\n\n".join(out) + "\n"


def bank_placebo(bank: reasoningbank.Bank, rng: random.Random) -> reasoningbank.Bank:
    """The same entries and queries (so retrieval picks the same past task), each item's title,
    description and content replaced by neutral text of the same length."""
    entries = []
    for e in bank.entries:
        items = [
            reasoningbank.MemoryItem(
                title=fit(len(i.title), rng, sentences=False).capitalize() or "Note",
                description=fit(len(i.description), rng),
                content=fit(len(i.content), rng),
                provenance=i.provenance,
            )
            for i in e.items
        ]
        entries.append(e.model_copy(update={"items": items}))
    return bank.model_copy(update={"entries": entries})


def _bank_chars(bank: reasoningbank.Bank) -> int:
    return sum(len(i.title) + len(i.description) + len(i.content) for e in bank.entries for i in e.items)


def deployed_chars(directory: Path) -> int:
    """An artifact's length as its placebo is matched to it: SkillOpt's document, AWM's workflows, the
    text of ReasoningBank's memory items (not its query vectors); 0 for the static identity."""
    method = read_meta(directory).method.removeprefix("placebo-")
    if method == "skillopt":
        return len((directory / skillopt.STATE_FILE).read_text())
    if method == "awm":
        return len((directory / awm.STATE_FILE).read_text())
    if method == "reasoningbank":
        return _bank_chars(
            reasoningbank.Bank.model_validate_json((directory / reasoningbank.BANK_FILE).read_text())
        )
    return 0


def make_placebo(seed: int, lineage: str, method: str, real_dir: Path, out_dir: Path) -> dict[str, Any]:
    real_meta = read_meta(real_dir)
    rng = random.Random(derive_seed(seed, lineage, method, "placebo"))
    inputs = {"real_meta": sha256_file(real_dir / "meta.json")}
    extra: dict[str, Any] = {}
    if method == "skillopt":
        real = (real_dir / skillopt.STATE_FILE).read_text()
        fake = skill_placebo(real, rng)
        state, real_len, fake_len = {skillopt.STATE_FILE: fake}, len(real), len(fake)
    elif method == "awm":
        real = (real_dir / awm.STATE_FILE).read_text()
        fake = workflow_placebo(real, rng)
        state, real_len, fake_len = {awm.STATE_FILE: fake}, len(real), len(fake)
        extra = {"steps_real": len(awm.steps(real)), "steps_placebo": len(awm.steps(fake))}
    elif method == "reasoningbank":
        bank = reasoningbank.Bank.model_validate_json((real_dir / reasoningbank.BANK_FILE).read_text())
        fake_bank = bank_placebo(bank, rng)
        vectors = json.loads((real_dir / reasoningbank.VECTORS_FILE).read_text())
        state = reasoningbank.bank_state(fake_bank, vectors)
        real_len, fake_len = _bank_chars(bank), _bank_chars(fake_bank)
        extra = {"items": sum(len(e.items) for e in fake_bank.entries)}
    else:
        raise ValueError(f"placebo: no placebo is defined for method {method!r}")
    ratio = fake_len / real_len if real_len else None
    diagnostics = {
        "of_method": method,
        "real_chars": real_len,
        "placebo_chars": fake_len,
        "length_ratio": ratio,
        **extra,
    }
    clear_artifact(out_dir)
    meta = ArtifactMeta(
        method=f"placebo-{method}",
        lineage=lineage,
        state_files=sorted(state),
        inputs=inputs | {k: v for k, v in real_meta.inputs.items() if k == "acquisition"},
        diagnostics=diagnostics,
    )
    write_artifact(out_dir, meta, state)
    return diagnostics
