"""The environment half (``interface.SuiteEnvironment``, ``environments.OfficialTasks``) of an AgentDojo
suite run on its own fixture: AgentDojo's default environment of the suite, loaded with the episode's
injections by AgentDojo's loader (``load_and_inject_default_environment``) and prepared by the user task's
``init_environment``, as AgentDojo's runner does; tools run through the suite's ``FunctionsRuntime``.
Nothing here judges an episode (replay may import it)."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any

from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.task_suite.task_suite import TaskSuite

from evoaudit.records import Call, Instance
from evoaudit.suite.agentdojo import toolkit
from evoaudit.suite.agentdojo.profile import AgentDojoProfile

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig

BENCHMARK_VERSION = "v1.2.2"


@functools.cache
def load_suite(name: str) -> TaskSuite:
    """AgentDojo's suite ``name`` at the audited version; its tools run on the fixed clock
    (``toolkit.fix_clock``)."""
    toolkit.fix_clock()
    return get_suite(BENCHMARK_VERSION, name)


def fixture_reference(name: str, family: str) -> str:
    """An instance's ``environment_template`` for these suites: which AgentDojo default environment and
    user task it starts from (the loader builds the fixture; the text is not copied into the table)."""
    return json.dumps(
        {"benchmark": "agentdojo", "version": BENCHMARK_VERSION, "suite": name, "user_task": family},
        sort_keys=True,
    )


class OfficialToolSession:
    """The suite's own runtime over one environment, in process (``interface.ToolSession``)."""

    def __init__(self, suite: OfficialEnvironments, env: Any) -> None:
        self.suite = suite
        self.env = env

    def schemas(self) -> tuple[dict[str, Any], ...]:
        return self.suite.tool_schemas()

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        result, error = self.suite.runtime().run_function(self.env, name, args)
        return (error, error) if error else (toolkit.format_tool_result(result), None)

    def close(self) -> None:
        pass


class OfficialEnvironments:
    """AgentDojo suite ``name``'s environments and tools. ``read_only``: the suite's tools that look
    things up (the interface's read-call diagnostics and the simulator's reading), which AgentDojo does
    not mark, so each suite's folder lists them. ``volatile``: state paths (keys, ``*`` for any one key
    or position) those look-ups change, which harm never counts (``official.unauthorised_changes``)."""

    replay_kind = "agentdojo-official"

    def __init__(
        self, name: str, read_only: frozenset[str], volatile: frozenset[tuple[str, ...]] = frozenset()
    ) -> None:
        self.name = name
        self._read_only = read_only
        self.volatile = volatile
        unknown = read_only - {f.name for f in load_suite(name).tools}
        if unknown:
            raise ValueError(f"suite {name}: read-only tools {sorted(unknown)} are not tools of the suite")

    def task_suite(self) -> TaskSuite:
        return load_suite(self.name)

    def runtime(self) -> FunctionsRuntime:
        return _runtime(self.name)

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return _schemas(self.name)

    def read_only_tools(self) -> frozenset[str]:
        return self._read_only

    def pre_environment(self, family: str, injections: dict[str, str] | None = None) -> Any:
        """AgentDojo's default environment with ``injections`` placed, prepared for user task ``family``."""
        suite = load_suite(self.name)
        env = suite.load_and_inject_default_environment(dict(injections or {}))
        return suite.get_user_task_by_id(family).init_environment(env)

    def build_environment(self, instance: Instance, attack: str | None, injections: dict[str, str]) -> Any:
        return self.pre_environment(instance.family, injections)

    def open_tools(self, env: Any, suite_cfg: SuiteConfig | None) -> OfficialToolSession:
        return OfficialToolSession(self, env)

    def run_call(self, env: Any, call: Call) -> tuple[str, str | None]:
        return OfficialToolSession(self, env).call(call.function, dict(call.args))

    def format_result(self, result: Any) -> str:
        return toolkit.format_tool_result(result)

    def state(self, env: Any) -> dict[str, Any]:
        return env.model_dump(mode="json")

    def state_sha256(self, env: Any) -> str:
        blob = json.dumps(self.state(env), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    def copy_environment(self, env: Any) -> Any:
        return env.model_copy(deep=True)

    def agent_profile(self, name: str) -> AgentDojoProfile | None:
        """``agent.profile``: ``default`` (None) or ``agentdojo``, AgentDojo's own runner."""
        if name == "default":
            return None
        if name == "agentdojo":
            return _profile(self.name)
        raise ValueError(
            f"agent.profile: {name!r} is not a profile of suite {self.name} (default, agentdojo)"
        )

    # --- AgentDojo's official task objects, for replay's second reading (``environments.OfficialTasks``) --
    def official_user_task(self, family: str) -> Any:
        return load_suite(self.name).get_user_task_by_id(family)

    def official_injection_task(self, goal: str) -> Any:
        return load_suite(self.name).get_injection_task_by_id(goal)

    def environment_of(self, state: dict[str, Any]) -> Any:
        """The suite's environment class holding ``state`` (plain JSON data). Refused when validation does
        not give ``state`` back: Workspace's inbox, for one, rebuilds its emails from ``initial_emails`` on
        validation, dropping those an episode sent."""
        env = load_suite(self.name).environment_type.model_validate(state)
        if self.state(env) != state:
            raise ValueError(
                f"suite {self.name}: its environment class does not rebuild this state faithfully from "
                "plain data (validation derives fields); judge on the live environment instead"
            )
        return env


@functools.cache
def _runtime(name: str) -> FunctionsRuntime:
    # The runtime holds only the tool table; one serves every session of the suite.
    return FunctionsRuntime(load_suite(name).tools)


@functools.cache
def _schemas(name: str) -> tuple[dict[str, Any], ...]:
    return toolkit.tool_schemas(load_suite(name))


@functools.cache
def _profile(name: str) -> AgentDojoProfile:
    return AgentDojoProfile(load_suite(name))
