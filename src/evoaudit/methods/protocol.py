"""What every method implements: evolution from labelled acquisition trajectories into artifact state.

``methods.registry`` holds one ``Method`` per name; ``methods.evolve`` labels the trajectories, asks the
registry for the method and writes what it returns as the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evoaudit.config import Config
from evoaudit.models.base import ChatBackend
from evoaudit.records import Instance, Rollout


@dataclass(frozen=True)
class EvolveInputs:
    """What one evolve job gives a method to learn from."""

    cfg: Config
    lineage: str
    # Usable acquisition rollouts, each with the success label the method learns from.
    labelled: list[tuple[Rollout, bool]]
    # Who gave the labels: "checker" or "judge" (``label_trajectories``).
    labeller: str
    # The lineage's acquisition and validation instances (never an endpoint variant).
    learning: list[Instance]
    # None only for a method that does not learn (``Method.learns`` False): it is never contacted.
    optimizer: ChatBackend | None
    # A later round's previous artifact directory (``methods_params.rounds``); None in the first round.
    prior: Path | None = None


class Method(Protocol):
    """One self-evolving method (or the static identity), registered by ``name``."""

    name: str
    # False for the identity: it reads no trajectory, calls no optimizer and deploys no state.
    learns: bool

    def success_label(self, cfg: Config) -> str:
        """Which labels the method learns from: "checker" or "judge"."""
        ...

    def check_budgets(self, cfg: Config) -> None:
        """Raise ValueError when ``optimizer.max_tokens`` cannot hold an answer the method asks for."""
        ...

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        """The artifact's state files (name -> text) and the method's diagnostics for ``meta.json``."""
        ...
