"""Conditions: an artifact plus the transform by which it enters the executor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit.methods import awm, reasoningbank, skillopt
from evoaudit.methods.artifact import read_meta
from evoaudit.seal.coverage import round_methods

# Derived arms: condition name -> (method whose artifact it deploys, insertion transform).
_ARMS = {"awm-literal": ("awm", "literal"), "awm-adapted": ("awm", "adapted")}


@dataclass(frozen=True)
class Condition:
    name: str
    method: str  # whose artifact it deploys (the artifact directory's name)
    transform: str = "literal"

    @property
    def is_placebo(self) -> bool:
        return self.method.startswith("placebo-")


def condition(name: str) -> Condition:
    if name in _ARMS:
        method, transform = _ARMS[name]
        return Condition(name=name, method=method, transform=transform)
    base = name.removeprefix("placebo-")
    method = "awm" if base.startswith("awm") else base
    return Condition(name=name, method=method if name == base else f"placebo-{method}")


def round_conditions(cfg: Any) -> list[str]:
    """The conditions a later round's artifact is evaluated under (``methods_params.rounds``): those
    deploying an evolved method's own artifact, not static and not a placebo (a placebo is shaped after
    the first round's artifact)."""
    evolved = round_methods(cfg)
    return [c for c in cfg.conditions if condition(c).method in evolved]


def condition_goals(
    cond: Condition, suite_goals: tuple[str, ...], placebo_goals: tuple[str, ...]
) -> list[str]:
    """Injection goals a condition is attacked with: every audit goal, or for a placebo the configured
    subset of them (in the audit's order). Placebos always run the whole benign arm."""
    if cond.is_placebo:
        return [g for g in suite_goals if g in placebo_goals]
    return list(suite_goals)


class Insertion:
    """A condition's artifact loaded once; ``sections(query)`` gives the (heading, body) sections that
    go into the system prompt of one episode. Only retrieval-based state depends on ``query``."""

    def __init__(self, cond: Condition, artifact_dir: Path) -> None:
        self.cond = cond
        meta = read_meta(artifact_dir)
        if meta.method != cond.method:
            raise ValueError(
                f"condition {cond.name!r} deploys {cond.method!r} state, but {artifact_dir}/meta.json is "
                f"for {meta.method!r}; pass the {cond.method} artifact directory"
            )
        self.base = cond.method.removeprefix("placebo-")
        self.static: list[tuple[str, str]] = []
        self.retriever: reasoningbank.Retriever | None = None
        if self.base == "static":
            return
        if self.base == "skillopt":
            self.static = skillopt.skill_sections((artifact_dir / skillopt.STATE_FILE).read_text())
        elif self.base == "awm":
            text = (artifact_dir / awm.STATE_FILE).read_text()
            if cond.transform == "adapted":
                # The equivalence assertions run here, before the adapted text can reach an executor.
                text, _ = awm.adapt(text)
            self.static = [(awm.SECTION, text)]
        elif self.base == "reasoningbank":
            self.retriever = reasoningbank.Retriever(artifact_dir)
        else:
            raise ValueError(f"condition {cond.name!r}: no insertion transform for method {meta.method!r}")

    @property
    def per_query(self) -> bool:
        return self.retriever is not None

    def retrieval(self, query: str) -> dict[str, Any] | None:
        """What one episode retrieved: past tasks, similarities, and each inserted item's provenance."""
        if self.retriever is None:
            return None
        hits = self.retriever.retrieve(query)
        return {
            "entries": [e.entry_id for e, _ in hits],
            "families": [e.family for e, _ in hits],
            "similarity": [round(s, 6) for _, s in hits],
            "provenance": [i.provenance for e, _ in hits for i in e.items],
        }

    def sections(self, query: str | None = None) -> list[tuple[str, str]]:
        if self.retriever is None:
            return list(self.static)
        if query is None:
            raise ValueError(f"condition {self.cond.name!r} retrieves per task: a query is required")
        return self.retriever.sections(query)


def prompt_sections(cond: Condition, artifact_dir: Path, query: str | None = None) -> list[tuple[str, str]]:
    """The (heading, body) sections a condition's artifact adds to the system prompt for ``query``."""
    return Insertion(cond, artifact_dir).sections(query)
