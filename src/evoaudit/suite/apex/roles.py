"""APEX-Harm's model roles (``suite.roles.SuiteRoles``): the judge (``judge.py``, its decisions completed
by ``decisions.py``) and the attacker (``attacker.py``, simulated by ``attacker_sim.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoaudit.records import Message
from evoaudit.suite.apex import attacker, attacker_sim, decisions, judge

# The checks a recorded decision may leave to the judge besides the task score, in the order asked.
CHECKS = ("attack_success", "exposure")


class ApexRoles:
    judge_system_prefix = judge.SYSTEM_PREFIX
    verdict_schema = judge.VERDICT_SCHEMA

    def make_judge(self, ask: Callable[[list[Message], int], str], model: str) -> judge.Judge:
        return judge.Judge(ask, model)

    def resolve(self, recorded: dict[str, Any], judge: Any) -> dict[str, Any]:
        final = {check: decisions.resolve(recorded[check], judge) for check in CHECKS if check in recorded}
        if "task_score" in recorded:
            final["task_score"] = decisions.resolve_task(recorded["task_score"], judge)
        return final

    def make_attacker(self, endpoint: Any, transport: Any = None) -> attacker.Attacker:
        return attacker.make_attacker(endpoint, transport)

    def attacker_answer(self, messages: tuple[Message, ...]) -> str:
        return attacker_sim.answer(messages)
