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
        self, env: Any, name: str, args: dict[str, Any], actor: str = "agent"
    ) -> tuple[str, str | None]: ...

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


def _banking_environments() -> Any:
    from evoaudit.suite.agentdojo.banking.environments import BankingEnvironments

    return BankingEnvironments()


def _apex_environments() -> Any:
    # Imported on first use, like the suites in ``registry``; the module holds no judging code.
    from evoaudit.suite.apex.environment import ApexEnvironments

    return ApexEnvironments()


def _agentdojo_environments(name: str) -> Callable[[], Any]:
    # Workspace, Travel and Slack: the generic AgentDojo environment half (``agentdojo.official_env``)
    # with each suite's tool facts (its ``tools`` module, free of judging code).
    def factory() -> Any:
        import importlib

        return importlib.import_module(f"evoaudit.suite.agentdojo.{name}.tools").environments()

    return factory


ENVIRONMENTS: dict[str, Callable[[], Any]] = {
    "banking": _banking_environments,
    "apex": _apex_environments,
    "workspace": _agentdojo_environments("workspace"),
    "travel": _agentdojo_environments("travel"),
    "slack": _agentdojo_environments("slack"),
}


def get_environment(name: str) -> SuiteEnvironment:
    """The environment half of suite ``name`` (only suites registered here; see the module docstring)."""
    try:
        return ENVIRONMENTS[name]()
    except KeyError:
        raise ValueError(
            f"suite.name: no environment registered for suite {name!r} in evoaudit.suite.environments; "
            f"known: {sorted(ENVIRONMENTS)}"
        ) from None
