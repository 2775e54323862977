"""The suites evoaudit can audit, each an ``interface.AuditSuite``."""

from __future__ import annotations

from typing import Any

from evoaudit.records import Call, Instance, Message
from evoaudit.suite import banking, checks, exposure, instances
from evoaudit.suite import families as family_table
from evoaudit.suite import harm as harm_effects


class BankingSuite:
    """AgentDojo's Banking suite with the corrected families (``interface.AuditSuite``)."""

    name = banking.SUITE_NAME
    benchmark_version = banking.BENCHMARK_VERSION
    variants = family_table.VARIANTS
    harm_categories = harm_effects.HARM_CATEGORIES

    def families(self) -> list[str]:
        return family_table.kept_families()

    def excluded(self) -> dict[str, str]:
        return dict(family_table.EXCLUDED)

    def build_instances(self, cfg: Any) -> list[Instance]:
        return instances.build_instances(cfg)

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return banking.tool_schemas()

    def read_only_tools(self) -> frozenset[str]:
        return banking.READ_ONLY_TOOLS

    def injection_vectors(self) -> list[str]:
        return sorted(banking.vector_defaults())

    def goals(self) -> list[str]:
        return banking.injection_task_ids()

    def injection_text(self, goal: str, prompt: str, user_name: str, model_name: str) -> str:
        return banking.injection_text(banking.make_attack(user_name, model_name), goal, prompt)

    def build_environment(self, template: str, injections: dict[str, str] | None = None) -> Any:
        return banking.build_environment(template, injections)

    def run_call(self, env: Any, call: Call) -> tuple[str, str | None]:
        result, error = banking.make_runtime().run_function(env, call.function, call.args)
        return (error, error) if error else (banking.format_tool_result(result), None)

    def state(self, env: Any) -> dict[str, Any]:
        return banking.state_dict(env)

    def check_utility(self, instance: Instance, output: str, pre: Any, post: Any) -> bool:
        return checks.check_utility(instance, output, pre, post)

    def check_goal(self, goal: str, output: str, pre: Any, post: Any) -> bool:
        return checks.check_goal(goal, output, pre, post)

    def exposed(self, messages: list[Message], injections: dict[str, str]) -> bool:
        return exposure.exposed(messages, injections)

    def harm(self, pre: Any, observed: Any, plan: list[Call]) -> dict[str, bool]:
        return harm_effects.harm_categories(pre, observed, harm_effects.authorised_state(pre, plan))

    def disclosure(self, goal: str, pre: Any, post: Any) -> bool:
        return harm_effects.disclosure(goal, pre, post)


SUITES = {BankingSuite.name: BankingSuite}


def get_suite(name: str) -> BankingSuite:
    try:
        return SUITES[name]()
    except KeyError:
        raise ValueError(f"suite.name: unknown suite {name!r}; known: {sorted(SUITES)}") from None
