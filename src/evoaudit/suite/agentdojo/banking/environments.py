"""Banking's environment half (``interface.SuiteEnvironment``): AgentDojo's own runtime over a Banking
environment built from an instance's fixture YAML with the injected vectors filled."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from evoaudit.records import Call, Instance
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.profile import AgentDojoProfile

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig


class BankingToolSession:
    """AgentDojo's own runtime over one Banking environment, in process (``interface.ToolSession``)."""

    def __init__(self, env: Any, runtime: Any = None) -> None:
        self.env = env
        self.runtime = runtime or banking.make_runtime()

    def schemas(self) -> tuple[dict[str, Any], ...]:
        return banking.tool_schemas()

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        result, error = self.runtime.run_function(self.env, name, args)
        return (error, error) if error else (banking.format_tool_result(result), None)

    def close(self) -> None:
        pass


class BankingEnvironments:
    """AgentDojo Banking environments: the fixture YAML of an instance with the injected vectors filled."""

    name = banking.SUITE_NAME
    replay_kind = "agentdojo-banking"

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return banking.tool_schemas()

    def read_only_tools(self) -> frozenset[str]:
        return banking.READ_ONLY_TOOLS

    def build_environment(self, instance: Instance, attack: str | None, injections: dict[str, str]) -> Any:
        # The goal is already in the injected text: Banking places the same text in every reached vector.
        return banking.build_environment(instance.environment("agentdojo-yaml"), injections)

    def open_tools(self, env: Any, suite_cfg: SuiteConfig | None) -> BankingToolSession:
        return BankingToolSession(env)

    def run_call(self, env: Any, call: Call) -> tuple[str, str | None]:
        return BankingToolSession(env, _shared_runtime()).call(call.function, dict(call.args))

    def format_result(self, result: Any) -> str:
        return banking.format_tool_result(result)

    def state(self, env: Any) -> dict[str, Any]:
        return banking.state_dict(env)

    def state_sha256(self, env: Any) -> str:
        return banking.state_sha256(env)

    def copy_environment(self, env: Any) -> Any:
        return banking.copy_environment(env)

    def agent_profile(self, name: str) -> AgentDojoProfile | None:
        """``agent.profile``: ``default`` (None: evoaudit's own prompt and request shape) or ``agentdojo``,
        AgentDojo's own runner (``suite.agentdojo.profile``)."""
        if name == "default":
            return None
        if name == "agentdojo":
            return _agentdojo_profile()
        raise ValueError(f"agent.profile: {name!r} is not a profile of suite banking (default, agentdojo)")

    # --- AgentDojo's official task objects, for replay's second reading (``replay/predicates.py``) --------
    # AgentDojo's own checkers (``utility``, ``security``, ``ground_truth``) on its own environment class;
    # none of evoaudit's Banking checks.

    def official_user_task(self, family: str) -> Any:
        """AgentDojo's user task ``family``."""
        return banking.user_task(family)

    def official_injection_task(self, goal: str) -> Any:
        """AgentDojo's injection task ``goal``."""
        return banking.injection_task(goal)

    def environment_of(self, state: dict[str, Any]) -> Any:
        """AgentDojo's Banking environment holding ``state`` (``state``'s plain JSON data)."""
        return banking.BankingEnvironment.model_validate(state)


@functools.cache
def _agentdojo_profile() -> AgentDojoProfile:
    return AgentDojoProfile(banking.load_suite())


@functools.cache
def _shared_runtime() -> Any:
    # The runtime holds only the tool table; one serves every single call made outside a session.
    return banking.make_runtime()
