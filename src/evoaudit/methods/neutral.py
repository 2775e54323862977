"""Neutral text for placebos: task-irrelevant sentences about tidy writing, fitted to a target length and
shaped like a method's artifact (a Markdown document, AWM-style workflows, any line-structured text)."""

from __future__ import annotations

import random
import re

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
    """Generic prose shaped after the workflows: one ``## `` section per workflow, its introduction and one
    plain sentence line per step, each of the length of what it stands for (the step's tags included), so
    that the length ratio stays near 1. No ``<think>``/``<action>`` envelope and nothing that reads as a
    call: the placebo is the control for prompt length alone, and an envelope would make it emit textual
    actions itself (Agent Workflow Memory's placebo in the published protocol is generic prose)."""
    blocks = [b for b in re.split(r"(?m)^(?=## )", real) if b.strip().startswith("## ")]
    out = []
    for b in blocks:
        _, _, rest = b.partition("\n")
        first_step = rest.find("<think>")
        intro = rest[:first_step].strip() if first_step != -1 else rest.strip()
        parts = [f"## {rng.choice(_TITLES)}", fit(len(intro), rng)]
        for step in _WF_STEP.finditer(rest):
            parts.append(fit(len(step.group(0)), rng))
        out.append("\n".join(p for p in parts if p))
    return "\n\n".join(out) + "\n"


_MARKER = re.compile(r"^(\s*(?:#{1,6} |[-*+] |\d+[.)] |> )?)(.*)$")


def text_placebo(real: str, rng: random.Random) -> str:
    """Line by line: each line's Markdown marker (heading, bullet, number, quote) kept and its text
    replaced by neutral text of the same length; blank lines kept. The generic placebo of a text artifact
    (``MethodBase``)."""
    out = []
    for line in real.split("\n"):
        marker, body = _MARKER.match(line).groups()  # type: ignore[union-attr]
        out.append(marker + fit(len(body), rng) if body.strip() else line)
    return "\n".join(out)
