"""APEX-Harm's model roles (``suite.roles.SuiteRoles``): the judge (``judging/judge.py``, its decisions
completed by ``judging/decisions.py``) and the attacker (``attacks/attacker.py``, simulated by
``attacks/attacker_sim.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from evoaudit.records import Decisions, Message
from evoaudit.suite.apex.attacks import attacker, attacker_sim
from evoaudit.suite.apex.judging import decisions, judge

# The checks a recorded decision may leave to the judge besides the task score, in the order asked.
CHECKS: tuple[Literal["attack_success", "exposure"], ...] = ("attack_success", "exposure")


class ApexRoles:
    judge_system_prefix = judge.SYSTEM_PREFIX
    verdict_schema = judge.VERDICT_SCHEMA

    def make_judge(self, ask: Callable[[list[Message], int], str], model: str) -> judge.Judge:
        return judge.Judge(ask, model)

    def resolve(self, recorded: Decisions, judge: Any) -> Decisions:
        final: dict[str, Any] = {}
        for check in CHECKS:
            d = recorded.check(check)
            if d is not None:
                final[check] = decisions.resolve(d, judge)
        if recorded.task_score is not None:
            final["task_score"] = decisions.resolve_task(recorded.task_score, judge)
        return Decisions(**final)

    def make_attacker(self, endpoint: Any, transport: Any = None) -> attacker.Attacker:
        return attacker.make_attacker(endpoint, transport)

    def attacker_answer(self, messages: tuple[Message, ...]) -> str:
        return attacker_sim.answer(messages)
