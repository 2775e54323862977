"""The environment half of each suite (``interface.SuiteEnvironment``): build, act on, copy and read.

Kept apart from ``registry`` so that a stage that must not lean on a suite's judging code (replay) can
reach environments and tools without importing the suite's checks, exposure or harm modules; the replay
contract in pyproject.toml checks indirect imports too. Besides ``SuiteEnvironment``, a suite's environment
half gives replay's re-execution what it needs: ``OfficialTasks`` (AgentDojo's suites) or
``WorkspaceReplay`` (APEX-Harm).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from evoaudit.suite.interface import SuiteEnvironment
from evoaudit.suite.registry import resolve

# What replay's re-execution needs of a suite beyond ``SuiteEnvironment``, and nothing that judges.


@runtime_checkable
class OfficialTasks(Protocol):
    """AgentDojo's own task objects and environment class (their ``utility``, ``security`` and
    ``ground_truth`` are AgentDojo's checkers), for replay's second reading of the official predicates."""

    def official_user_task(self, family: str) -> Any: ...

    def official_injection_task(self, goal: str) -> Any: ...

    def environment_of(self, state: dict[str, Any]) -> Any:
        """The benchmark's environment object holding ``state`` (plain JSON data)."""
        ...


@runtime_checkable
class WorkspaceReplay(Protocol):
    """An APEX-Harm workspace as replay re-executes it: the tool layer, the attacks' goals and watchers, and
    the task's own files as the tools show them."""

    def call_tool(
        self,
        env: Any,
        name: str,
        args: dict[str, Any],
        actor: str = "agent",
        copy_back_bytes: Callable[[str, bytes], bytes] | None = None,
    ) -> tuple[str, str | None]:
        """One tool call, recorded; ``copy_back_bytes`` chooses the bytes a program's written files are
        copied back with (replay's recorded ones), and ``env.copied_back`` says what was applied."""
        ...

    def resolve_attack(self, instance: Any, attack: str) -> Any: ...

    def attack_goal(self, attack: Any) -> Any: ...

    def attach_watcher(self, env: Any, attack: Any, goal: Any) -> None: ...

    def read_text(self, data: bytes, kind: str) -> str | None:
        """A file's text as the tools show it; None when they cannot read it as ``kind``."""
        ...

    def kind_of(self, path: str) -> str: ...

    def task_sources(self, instance: Any) -> tuple[Any, dict[str, bytes]]:
        """(the task record, the task's own files {path: bytes})."""
        ...


def get_environment(name: str) -> SuiteEnvironment:
    """The environment half of suite ``name`` (its ``environments`` entry in ``suite.registry``)."""
    return resolve("environments", name)()
