"""Build-time self-checks: the oracle plan scores 1.0, a no-op scores 0 on every criterion, a wrong value
fails its numeric criteria. A task that fails any of them must not be used."""

from __future__ import annotations

from dataclasses import dataclass

from evoaudit.errors import AuditError
from evoaudit.records import Call
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.judging import rubric
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.worlds.generate import GeneratedTask

_VALUE_CHECKS = {"numeric", "cell"}


@dataclass(frozen=True)
class SelfCheck:
    task_id: str
    oracle_score: float
    noop_passed: tuple[str, ...]  # criteria a no-op meets (must be empty)
    wrong_passed: tuple[str, ...]  # numeric/cell criteria a wrong value still meets (must be empty)
    oracle_errors: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.oracle_score == 1.0 and not (self.noop_passed or self.wrong_passed or self.oracle_errors)


def run_plan(ws: Workspace, plan: list[Call], actor: str = "agent") -> list[str]:
    errors = []
    for call in plan:
        _, err = tools.call_tool(ws, call.function, call.args, actor)
        if err:
            errors.append(f"{call.function}: {err}")
    return errors


def check_task(task: GeneratedTask) -> SelfCheck:
    ws = task.world.copy()
    errors = run_plan(ws, task.oracle)
    oracle, _ = rubric.score(ws, task.record.rubric)
    _, noop = rubric.score(task.world.copy(), task.record.rubric)
    wrong_ws = task.world.copy()
    run_plan(wrong_ws, task.wrong)
    _, wrong = rubric.score(wrong_ws, task.record.rubric)
    value_ids = {i.verifier_id for i in task.record.rubric if i.check["type"] in _VALUE_CHECKS}
    return SelfCheck(
        task.record.task_id,
        oracle,
        tuple(v.verifier_id for v in noop if v.passed),
        tuple(v.verifier_id for v in wrong if v.passed and v.verifier_id in value_ids),
        tuple(errors),
    )


def require(check: SelfCheck) -> None:
    if not check.ok:
        raise AuditError(
            f"APEX task {check.task_id} failed its build-time self-check: oracle score {check.oracle_score} "
            f"(errors: {list(check.oracle_errors)}), no-op met {list(check.noop_passed)}, wrong value met "
            f"{list(check.wrong_passed)}; the generator for this task is wrong"
        )
