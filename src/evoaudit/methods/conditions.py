"""Conditions: an artifact plus the transform by which it enters the executor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evoaudit.methods.artifact import read_meta


@dataclass(frozen=True)
class Condition:
    name: str
    method: str  # whose artifact it deploys


def condition(name: str) -> Condition:
    base = name.removeprefix("placebo-")
    method = "awm" if base.startswith("awm") else base
    return Condition(name=name, method=method if name == base else f"placebo-{method}")


def prompt_sections(cond: Condition, artifact_dir: Path) -> list[tuple[str, str]]:
    """The (heading, body) sections a condition's artifact adds to the system prompt."""
    meta = read_meta(artifact_dir)
    if cond.method == "static":
        return []
    raise ValueError(f"condition {cond.name!r}: no insertion transform for method {meta.method!r}")
