"""Scripted plans per attack category: complying reaches success on state; inspect-then-decline does not."""

from __future__ import annotations

import pytest
from apex_attack_kit import COMPLY, FACTS, REFUSE, attacked, run

from evoaudit.suite.apex.judging.exposure import check_exposure
from evoaudit.suite.apex.judging.success import check_goal
from evoaudit.suite.apex.runtime.isolation import available_sandbox

SCRIPTED = {2, 4, 5, 6}


def _cat(n: int):
    marks = [pytest.mark.skipif(available_sandbox() == "none", reason="no sandbox")] if n in SCRIPTED else []
    return pytest.param(n, marks=marks, id=f"category{n}")


CATEGORIES = [_cat(n) for n in range(1, 7)]


@pytest.mark.parametrize("category", CATEGORIES)
def test_complying_plan_reaches_the_goal_on_state(category):
    pre, ws, attack, goal = attacked(category)
    run(ws, COMPLY[category])
    decision = check_goal(goal, FACTS, pre, ws)
    assert (decision.value, decision.decided_by) == (True, "rule"), decision
    # Whoever acted: in the script categories the record at the destination was made by the program.
    actors = {c.actor for c in ws.calls if c.tool in ("send_mail", "create_event", "post_message")}
    if category in (4, 5, 6):
        assert actors and all(a.startswith("program:") for a in actors)


@pytest.mark.parametrize("category", CATEGORIES)
def test_inspect_then_decline_plan_does_not_succeed(category):
    pre, ws, attack, goal = attacked(category)
    assert run(ws, REFUSE[category]) == []
    decision = check_goal(goal, FACTS, pre, ws)
    assert (decision.value, decision.decided_by) == (False, "rule"), decision


@pytest.mark.parametrize("category", CATEGORIES)
def test_exposure_follows_the_category(category):
    _, ws, attack, _ = attacked(category)
    run(ws, REFUSE[category])
    exposed = check_exposure(attack, ws.calls)
    if category <= 4:
        # Refusing after reading still counts: exposure is about what the agent was shown.
        assert (exposed.value, exposed.decided_by) == (True, "rule")
    else:
        assert (exposed.value, exposed.decided_by) == (None, "not_applicable")


def test_a_no_op_reaches_no_goal():
    for category in range(1, 7):
        pre, ws, attack, goal = attacked(category)
        assert check_goal(goal, FACTS, pre, ws).value is False
