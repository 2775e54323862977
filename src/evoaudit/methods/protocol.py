"""What every method implements: evolution from labelled acquisition trajectories into artifact state, how
that state enters the executor (its insertions, each a condition), the shape of its placebo, its answer
budgets and its planned cost.

A method is registered by a Python entry point (group ``evoaudit.methods``, ``evoaudit.method_plugins``);
``methods.registry`` answers which method a name means. ``methods.evolve`` labels the trajectories, asks
the registry for the method and writes what it returns as the artifact; ``methods.conditions`` and
``methods.placebo`` ask the method for its insertion and its placebo. ``MethodBase`` gives the common
defaults (a single state file inserted as one system-prompt section); docs/methods.md shows a whole plugin.

A method never receives the whole ``Config``: its hooks take the ``methods_params`` section or the method's
view ``config.MethodSettings``, and episodes it runs itself go through the evolve stage's ``EpisodeRunner``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evoaudit.config import MethodSettings, MethodsParams
from evoaudit.methods.neutral import text_placebo
from evoaudit.models.base import ChatBackend
from evoaudit.records import Instance, Rollout


class EpisodeRunner(Protocol):
    """The executor run on learning instances by the evolve stage, for a method that scores candidate state
    by real episodes (SkillOpt's validation gate): the stage holds what an episode needs (the executor
    endpoint, the agent loop and its settings, the suite), the method gives the sections and the seeds."""

    # ``roles.validation``: the variants a method may validate on (never an endpoint variant).
    validation_variants: tuple[str, ...]

    async def utilities(
        self, sections: list[tuple[str, str]], instances: list[Instance], seeds: list[int]
    ) -> list[bool | None]:
        """Each instance's episode with ``sections`` added to the system prompt, seeded by its seed: the
        checker's utility, None for an infrastructure failure; in the order of ``instances``."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """The executor's identity, for the artifact's diagnostics."""
        ...


@dataclass(frozen=True)
class EvolveInputs:
    """What one evolve job gives a method to learn from."""

    # The method's view of the configuration: its parameters, the seed, the suite's name, optimizer bounds.
    settings: MethodSettings
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
    # Runs executor episodes for the method (``EpisodeRunner``); None where the job runs none (a test, the
    # identity).
    episodes: EpisodeRunner | None = None

    def __getattr__(self, name: str) -> Any:
        # A plugin written against the earlier protocol reads ``inputs.cfg``: say what replaced it, in the
        # evolve job's log, rather than a bare AttributeError.
        if name == "cfg":
            raise AttributeError(
                "EvolveInputs.cfg (the whole configuration) was replaced by EvolveInputs.settings (a "
                "MethodSettings: methods_params, seed, suite_name, optimizer bounds) and "
                "EvolveInputs.episodes (runs executor episodes); see docs/methods.md, 'The protocol'"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@dataclass(frozen=True)
class Unit:
    """One unit of an artifact's state as its method learned it (a skill line, a workflow step, a memory
    item, a playbook bullet): what artifact contamination is measured per (docs/poisoning.md)."""

    # Stable within the artifact: the same files give the same ids.
    unit_id: str
    # What the unit is, in the method's own terms.
    kind: str
    text: str
    # The acquisition rollout the method itself records the unit came from (ReasoningBank's entry, ACE's
    # bullet source); None when the method keeps no such record.
    origin: str | None = None


class Deployed(Protocol):
    """One artifact as it enters the executor under one insertion, loaded once per evaluation job."""

    # True when the sections depend on the episode's task (retrieval); then ``sections`` needs the query.
    per_query: bool
    # True when ``retrieval(query)`` can be recomputed without calling an endpoint (the report re-traces it).
    retraceable: bool

    def sections(self, query: str | None) -> list[tuple[str, str]]:
        """The (heading, body) sections added to the system prompt of one episode."""
        ...

    def retrieval(self, query: str) -> dict[str, Any] | None:
        """What one episode retrieved (recorded in its rollout), with each item's ``provenance``; None when
        the insertion does not retrieve."""
        ...


@dataclass(frozen=True)
class PlaceboState:
    """A placebo's state files and the lengths its ``length_ratio`` is computed from."""

    state: dict[str, str]
    real_chars: int
    placebo_chars: int
    # Method-specific diagnostics of the placebo (e.g. AWM's step counts), written into its meta.json.
    extra: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    """One self-evolving method (or the static identity), registered by ``name``."""

    name: str
    # False for the identity: it reads no trajectory, calls no optimizer and deploys no state.
    learns: bool
    # Condition name -> insertion name: each way the artifact enters the executor is one condition, named
    # ``<name>`` or ``<name>-<insertion>`` (AWM: awm-literal, awm-adapted). Its placebo is inserted with the
    # first one.
    insertions: Mapping[str, str]
    # True when the inserted sections are retrieved per task (the report's retrieval-provenance table).
    retrieves: bool

    def success_label(self, params: MethodsParams) -> str:
        """Which labels the method learns from: "checker" or "judge"."""
        ...

    def check_budgets(self, settings: MethodSettings) -> None:
        """Raise ValueError when ``optimizer.max_tokens`` cannot hold an answer the method asks for."""
        ...

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        """The artifact's state files (name -> text) and the method's diagnostics for ``meta.json``."""
        ...

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        """The artifact in ``artifact_dir`` (the method's own, or its placebo's: same files) as it enters
        the executor under ``insertion`` (a value of ``insertions``)."""
        ...

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """Task-irrelevant state with the structure, size and insertion position of the real artifact."""
        ...

    def deployed_chars(self, artifact_dir: Path) -> int:
        """The artifact's length as its placebo is matched to it (0 when it deploys nothing)."""
        ...

    def units(self, artifact_dir: Path) -> list[Unit]:
        """The artifact's state as units (``Unit``), in the order the state holds them; none when it
        deploys nothing."""
        ...

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        """Executor rollouts one evolve job runs itself (``evoaudit plan``'s estimate), given the
        acquisition and validation instance counts of a lineage; 0 for a method that runs none."""
        ...


@dataclass(frozen=True)
class Sections:
    """A deployed artifact whose sections do not depend on the task."""

    fixed: list[tuple[str, str]]
    per_query: bool = False
    retraceable: bool = True

    def sections(self, query: str | None = None) -> list[tuple[str, str]]:
        return list(self.fixed)

    def retrieval(self, query: str) -> dict[str, Any] | None:
        return None


class MethodBase:
    """Defaults for a method whose artifact is one text file (``state_file``) inserted whole as one
    system-prompt section (``section``), with a placebo that keeps its lines' Markdown shape and lengths.
    A subclass sets ``name``, ``state_file`` and ``section`` and writes ``evolve``; it overrides what
    differs."""

    name: str
    learns = True
    retrieves = False
    state_file = "state.md"
    section = "Notes"

    @property
    def insertions(self) -> Mapping[str, str]:
        return {self.name: "literal"}

    def success_label(self, params: MethodsParams) -> str:
        return params.success_label

    def check_budgets(self, settings: MethodSettings) -> None:
        return None

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        text = (artifact_dir / self.state_file).read_text()
        return Sections([(self.section, text)] if text.strip() else [])

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        real = (real_dir / self.state_file).read_text()
        fake = text_placebo(real, rng)
        return PlaceboState({self.state_file: fake}, len(real), len(fake))

    def deployed_chars(self, artifact_dir: Path) -> int:
        return len((artifact_dir / self.state_file).read_text())

    # What one non-empty line of the state file is, in the method's terms (``units``).
    unit_kind = "line"

    def units(self, artifact_dir: Path) -> list[Unit]:
        """Every non-empty line of the state file, headings aside (they name sections, not content)."""
        lines = (artifact_dir / self.state_file).read_text().splitlines()
        return [
            Unit(f"{self.state_file}:{n}", self.unit_kind, line.strip())
            for n, line in enumerate(lines, 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]

    def validation_rollouts(self, params: MethodsParams, acquisition: int, validation: int) -> int:
        return 0
