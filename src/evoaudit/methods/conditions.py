"""Conditions: an artifact plus the insertion by which it enters the executor.

A condition is named after its method (``evoaudit.method_plugins``): ``<method>`` or
``<method>-<insertion>`` as the method's ``insertions`` list them, and ``placebo-<method>``, which deploys
the method's placebo with its first insertion. How an insertion reads the artifact is the method's
(``Method.deploy``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit import method_plugins
from evoaudit.config import Config, ConfigError
from evoaudit.methods.artifact import read_meta
from evoaudit.methods.protocol import Deployed
from evoaudit.methods.registry import get_method
from evoaudit.seal.coverage import round_methods


@dataclass(frozen=True)
class Condition:
    name: str
    method: str  # whose artifact it deploys (the artifact directory's name)
    transform: str = "literal"

    @property
    def is_placebo(self) -> bool:
        return self.method.startswith(method_plugins.PLACEBO_PREFIX)

    @property
    def base(self) -> str:
        """The method itself (for a placebo, the method it is shaped after)."""
        return self.method.removeprefix(method_plugins.PLACEBO_PREFIX)


def condition(name: str) -> Condition:
    try:
        method = method_plugins.check_condition(name)
    except method_plugins.MethodPluginError as exc:
        raise ConfigError(f"unknown condition: {exc}") from None
    learner = get_method(method)
    insertions = dict(learner.insertions)
    if name.startswith(method_plugins.PLACEBO_PREFIX):
        if not learner.learns:
            raise ConfigError(
                f"unknown condition: {name!r}: method {method!r} deploys no state, so no placebo"
            )
        first = next(iter(insertions.values()), "literal")
        return Condition(name=name, method=f"{method_plugins.PLACEBO_PREFIX}{method}", transform=first)
    if name not in insertions:
        raise ConfigError(
            f"unknown condition: {name!r}: method {method!r} has the conditions {sorted(insertions)}"
        )
    return Condition(name=name, method=method, transform=insertions[name])


def check_conditions(cfg: Config, source: str) -> None:
    """Every configured condition parses (its method's insertions, a placebo's method that learns); else a
    ConfigError naming ``source`` and the field. Run where a configuration enters a run."""
    for name in cfg.conditions:
        try:
            condition(name)
        except ValueError as exc:
            raise ConfigError(f"{source}: conditions: {exc}") from None


def deployment(method: str) -> Condition:
    """A method's own artifact as a later round's acquisition deploys it: under its first insertion."""
    first = next(iter(get_method(method).insertions.items()))
    return Condition(name=first[0], method=method, transform=first[1])


def round_conditions(cfg: Config) -> list[str]:
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
        self.base = cond.base
        self.deployed: Deployed = get_method(self.base).deploy(artifact_dir, cond.transform)

    @property
    def per_query(self) -> bool:
        return self.deployed.per_query

    @property
    def retraceable(self) -> bool:
        """Whether ``retrieval`` can be recomputed without calling an endpoint."""
        return self.deployed.retraceable

    def retrieval(self, query: str) -> dict[str, Any] | None:
        """What one episode retrieved: past tasks, similarities, and each inserted item's provenance."""
        if not self.per_query:
            return None
        return self.deployed.retrieval(query)

    def sections(self, query: str | None = None) -> list[tuple[str, str]]:
        if not self.per_query:
            return self.deployed.sections(None)
        if query is None:
            raise ValueError(f"condition {self.cond.name!r} retrieves per task: a query is required")
        return self.deployed.sections(query)


def prompt_sections(cond: Condition, artifact_dir: Path, query: str | None = None) -> list[tuple[str, str]]:
    """The (heading, body) sections a condition's artifact adds to the system prompt for ``query``."""
    return Insertion(cond, artifact_dir).sections(query)
