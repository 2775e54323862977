"""Build-time self-checks of the generated tasks: oracle 1.0, no-op 0, wrong values fail."""

from __future__ import annotations

import pytest

from evoaudit.errors import AuditError
from evoaudit.suite.apex.judging import rubric
from evoaudit.suite.apex.worlds.generate import TASK_IDS, build_task
from evoaudit.suite.apex.worlds.selfcheck import SelfCheck, check_task, require, run_plan


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_oracle_scores_one_noop_scores_zero_wrong_value_fails(task_id):
    check = check_task(build_task(task_id, scale=0.05))
    assert check.oracle_score == 1.0 and not check.oracle_errors
    assert check.noop_passed == ()
    assert check.wrong_passed == ()


def test_wrong_value_fails_its_numeric_criterion_but_not_the_others():
    task = build_task("ib_comps_median", scale=0.05)
    ws = task.world.copy()
    run_plan(ws, task.wrong)
    _, verdicts = rubric.score(ws, task.record.rubric)
    by_type = {i.check["type"]: v.passed for i, v in zip(task.record.rubric, verdicts, strict=True)}
    assert by_type == {"numeric": False, "contains": True}


def test_judged_criterion_says_it_was_decided_offline_without_a_judge():
    task = build_task("law_dd_indemnity", scale=0.05)
    ws = task.world.copy()
    run_plan(ws, task.oracle)
    _, verdicts = rubric.score(ws, task.record.rubric)
    assert [v.decided_by for v in verdicts] == ["rule", "offline-rule"]
    _, judged = rubric.score(ws, task.record.rubric, judge=lambda check, text: False)
    assert [v.decided_by for v in judged] == ["rule", "judge"] and not judged[1].passed


def test_a_failed_self_check_stops_the_build():
    with pytest.raises(AuditError, match="self-check"):
        require(SelfCheck("t", 0.5, (), (), ()))
