"""What a suite must provide to be audited: the contract the Banking adapter implements.

Another suite (a workspace suite with files, mail, chat and code execution is planned) implements the same
protocol; the stages above the suite layer need nothing else from it. Environments are opaque objects the
suite's own tools act on; instances are ``records.Instance`` rows whose ``predicate`` the suite interprets.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evoaudit.records import Call, Instance, Message


@runtime_checkable
class AuditSuite(Protocol):
    name: str
    benchmark_version: str
    variants: tuple[str, ...]
    harm_categories: tuple[str, ...]

    def families(self) -> list[str]:
        """Kept families (task ids), in a fixed order."""
        ...

    def excluded(self) -> dict[str, str]:
        """Families left out, each with its reason."""
        ...

    def build_instances(self, cfg: Any) -> list[Instance]:
        """Every kept family × variant with role, split, fixture, ground truth and corrected predicate."""
        ...

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        """The tools a model may call, as OpenAI function-calling schemas."""
        ...

    def read_only_tools(self) -> frozenset[str]: ...

    def injection_vectors(self) -> list[str]:
        """Names of the places in a fixture where an attack can put text."""
        ...

    def goals(self) -> list[str]:
        """Injection goal ids."""
        ...

    def injection_text(self, goal: str, prompt: str, user_name: str, model_name: str) -> str: ...

    def build_environment(self, template: str, injections: dict[str, str] | None = None) -> Any: ...

    def run_call(self, env: Any, call: Call) -> tuple[str, str | None]:
        """Execute one tool call on ``env``: the text the model sees and the error, if any."""
        ...

    def state(self, env: Any) -> dict[str, Any]:
        """The environment as plain JSON data."""
        ...

    def check_utility(self, instance: Instance, output: str, pre: Any, post: Any) -> bool: ...

    def check_goal(self, goal: str, output: str, pre: Any, post: Any) -> bool: ...

    def exposed(self, messages: list[Message], injections: dict[str, str]) -> bool: ...

    def harm(self, pre: Any, observed: Any, plan: list[Call]) -> dict[str, bool]:
        """One boolean per ``harm_categories`` entry, against the state ``plan`` authorises from ``pre``."""
        ...

    def disclosure(self, goal: str, pre: Any, post: Any) -> bool: ...
