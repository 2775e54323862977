"""The poisoning extension's lineages (docs/poisoning.md): which poisoned lineages a configuration adds,
how a poisoned lineage's name reads back, and which acquisition episodes carry the poison.

A poisoned lineage is ``<twin>-<goal>-s<percent>``: '-' never occurs in a configured lineage (``Id``), so
the name cannot collide with one and ``twin_of`` reads the clean twin back from the name alone. Every seed
a poisoned lineage draws is its twin's (``twin_of``), so the two lineages run the same episodes with the
same draws and differ only where the poison was placed. Beside the layers: config, the runner, the
methods and the workflow all read it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evoaudit.config import Config, ConfigError
from evoaudit.seeds import derive_seed

SEPARATOR = "-"


@dataclass(frozen=True)
class PoisonedLineage:
    """One poisoned lineage: its name, its clean twin, the persistence goal and the share poisoned."""

    name: str
    twin: str
    goal: str
    share: float


def lineage_name(twin: str, goal: str, share: float) -> str:
    return f"{twin}{SEPARATOR}{goal}{SEPARATOR}s{round(share * 100)}"


def poisoned_lineages(cfg: Config) -> list[PoisonedLineage]:
    """Every poisoned lineage ``cfg`` adds (none when ``poisoning.goals`` is empty), in config order."""
    p = cfg.poisoning
    if not p.goals:
        return []
    twins = p.lineages if p.lineages is not None else cfg.lineages
    unknown = sorted(set(twins) - set(cfg.lineages))
    if unknown:
        raise ConfigError(f"config: poisoning.lineages {unknown} are not in lineages {list(cfg.lineages)}")
    return [
        PoisonedLineage(lineage_name(t, g, s), t, g, s) for t in twins for g in p.goals for s in p.shares
    ]


def all_lineages(cfg: Config) -> list[str]:
    """The configured lineages, then the poisoned ones: every lineage that evolves and is sealed."""
    return list(cfg.lineages) + [p.name for p in poisoned_lineages(cfg)]


def twin_of(lineage: str) -> str:
    """The clean lineage whose seeds ``lineage`` draws: itself, or a poisoned lineage's twin."""
    return lineage.split(SEPARATOR, 1)[0]


def poisoned(cfg: Config, lineage: str) -> PoisonedLineage | None:
    """``lineage`` as a poisoned lineage of ``cfg``; None for a clean one."""
    if SEPARATOR not in lineage:
        return None
    for p in poisoned_lineages(cfg):
        if p.name == lineage:
            return p
    raise ConfigError(f"lineage {lineage!r} is no poisoned lineage of this configuration (poisoning)")


def poisoned_episodes(seed: int, p: PoisonedLineage, candidates: list[str], total: int) -> list[str]:
    """The acquisition episodes (rollout ids among ``candidates``, those an injection can reach) that
    carry the poison: round(share x total) of them, at most all candidates, drawn with a seed of the twin,
    the goal and the share, so the choice is fixed before any episode runs."""
    k = min(len(candidates), round(p.share * total))
    rng = random.Random(derive_seed(seed, p.twin, p.goal, f"{p.share:g}", "poison"))
    return sorted(rng.sample(sorted(candidates), k))
