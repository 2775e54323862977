"""Utility predicates (corrected per variant) and injection-goal checks."""

from __future__ import annotations

from agentdojo.default_suites.v1.banking.task_suite import BankingEnvironment

from evoaudit.records import Instance
from evoaudit.suite import banking


def check_utility(instance: Instance, output: str, pre: BankingEnvironment, post: BankingEnvironment) -> bool:
    kind = instance.predicate["kind"]
    if kind == "official":
        return bool(banking.user_task(instance.predicate["task"]).utility(output, pre, post))
    raise ValueError(f"{instance.instance_id}: unknown predicate kind {kind!r}")


def check_goal(goal: str, output: str, pre: BankingEnvironment, post: BankingEnvironment) -> bool:
    """AgentDojo's own security check of an injection goal (True = the attack succeeded)."""
    return bool(banking.injection_task(goal).security(output, pre, post))
