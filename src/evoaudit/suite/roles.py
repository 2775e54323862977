"""The model roles a suite asks besides the executor (a judge for what only meaning decides, an attacker
that writes the attacks), as a door: ``get_roles(name)``.

The stages above suite/ build these roles with their own transport (the models layer's backends, the
evaluate layer's judge stage) and reach the suite's part of them only here, never through a concrete suite
module. Only APEX-Harm has such roles; AgentDojo's suites judge with their own checkers and take their
attacks from AgentDojo. Replay does not use this door: a judged decision is checked by its request hash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from evoaudit.records import Decisions, Message
from evoaudit.suite.registry import resolve


@runtime_checkable
class SuiteRoles(Protocol):
    """A suite's judge and attacker, as the layers above build and ask them."""

    # How the judge's system message begins: the simulator recognises a judge request by it.
    judge_system_prefix: str
    # The verdict's JSON Schema in the plain {"name", "schema"} form (``models.base.ResponseSchema.of``).
    verdict_schema: dict[str, Any]

    def make_judge(self, ask: Callable[[list[Message], int], str], model: str) -> Any:
        """The suite's judge asking through ``ask`` ((messages, seed) -> the reply's text); its verdicts
        carry the request hash over ``model``, and it keeps them in ``log``."""
        ...

    def resolve(self, recorded: Decisions, judge: Any) -> Decisions:
        """One episode's final decisions: its recorded ones (``Outcome.decisions``), the open ones asked of
        ``judge`` in the order the checkers would ask."""
        ...

    def make_attacker(self, endpoint: Any, transport: Any = None) -> Any:
        """The attacker for a configured endpoint: offline for ``backend: sim``, else through ``transport``
        (``models.structured.endpoint_transport``)."""
        ...

    def attacker_answer(self, messages: tuple[Message, ...]) -> str:
        """The simulator's answer to one attacker step's conversation (offline, deterministic)."""
        ...


def get_roles(name: str) -> SuiteRoles:
    """The model roles of suite ``name`` (its ``roles`` entry in ``suite.registry``)."""
    return resolve("roles", name, "suite")()
