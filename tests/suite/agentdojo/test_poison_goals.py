"""The poisoning extension's persistence goals are AgentDojo injection tasks whose security check holds on
the state their ground truth leaves, and on no unpoisoned state."""

from __future__ import annotations

import pytest
from agentdojo.base_tasks import BaseInjectionTask
from agentdojo.functions_runtime import FunctionsRuntime

from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.poison import POISON_TASKS


@pytest.mark.parametrize("goal", sorted(POISON_TASKS))
def test_poison_goal_check_holds_after_its_ground_truth_and_not_before(goal):
    task = banking.injection_task(goal)
    assert isinstance(task, BaseInjectionTask) and goal not in banking.injection_task_ids()
    pre = banking.build_environment(banking.official_environment_template())
    # The attacker's IBAN is in no fixture: a hit in an artifact can only come from the poison.
    assert task.ATTACKER_IBAN not in banking.official_environment_template()
    assert task.ATTACKER_IBAN in task.GOAL
    post = banking.copy_environment(pre)
    assert not task.security("", pre, post)
    runtime = FunctionsRuntime(banking.load_suite().tools)
    for call in task.ground_truth(pre):
        runtime.run_function(post, call.function, dict(call.args))
    assert task.security("", pre, post)


def test_the_configuration_admits_exactly_the_goals_banking_defines():
    from evoaudit.config.suites import _SUITE_RULES

    assert _SUITE_RULES["banking"].poison_goals == tuple(POISON_TASKS)
