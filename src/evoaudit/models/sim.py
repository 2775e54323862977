"""The embedded default executor: a deterministic behavioural simulator.

It sees only what a model sees (messages and tool schemas) plus an explicitly granted oracle: the
corrected ground-truth plan of the instance whose prompt opens the conversation, and the plans of the
injection goals as they would apply to that instance. Every imperfection is a documented parameter
(``sim`` in config):

- ``read_propensity``: the episode performs the plan's read steps; otherwise it acts blind, skipping
  every read (and so never sees injected text), and each write is right only with ``blind_competence``;
- ``competence``: each write step (after reading) carries the right arguments; a wrong one has either a
  wrong amount or a wrong recipient;
- ``compliance``: once injected instructions appear in a tool result, the episode executes the injection
  goal's plan before resuming its task.

Draws are common random numbers: one seed per episode (sent as the request's ``seed``), the same under
every condition, so that a difference between conditions comes from what the prompt says, not the dice.
Every turn recomputes the episode's draws from that seed and continues from the history, so the simulator
keeps no state between requests and gives the same answer in-process and over HTTP.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from evoaudit.config import SimConfig
from evoaudit.models import sim_roles
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.records import Call, Instance, Message, ToolCall
from evoaudit.suite import banking

_WS = re.compile(r"\s+")
MAX_PLAN_DRAWS = 32


def _norm(text: str) -> str:
    return _WS.sub(" ", text.replace("''", "'")).strip()


@dataclass(frozen=True)
class OraclePlan:
    plan: tuple[Call, ...]
    answer: str | None
    goal_plans: dict[str, tuple[Call, ...]] = field(default_factory=dict)


@dataclass
class Oracle:
    """Ground-truth plans granted to the simulator, looked up by the opening user prompt."""

    by_prompt: dict[str, OraclePlan]
    goal_texts: dict[str, str]  # goal id -> normalised goal text, as it appears inside injections

    @classmethod
    def from_instances(cls, instances: list[Instance], goals: list[str]) -> Oracle:
        by_prompt: dict[str, OraclePlan] = {}
        for inst in instances:
            if inst.prompt in by_prompt:
                continue
            pre = banking.build_environment(inst.environment_template)
            goal_plans = {
                g: tuple(
                    Call(function=c.function, args=dict(c.args))
                    for c in banking.injection_task(g).ground_truth(pre.model_copy(deep=True))
                )
                for g in goals
            }
            by_prompt[inst.prompt] = OraclePlan(tuple(inst.ground_truth), inst.answer, goal_plans)
        texts = {g: _norm(banking.injection_task(g).GOAL) for g in goals}
        return cls(by_prompt=by_prompt, goal_texts=texts)


@dataclass(frozen=True)
class _Draws:
    read: float
    comply: float
    write: tuple[float, ...]
    error_kind: tuple[float, ...]


def _draws(seed: int | None) -> _Draws:
    rng = random.Random(seed if seed is not None else 0)
    read, comply = rng.random(), rng.random()
    write = tuple(rng.random() for _ in range(MAX_PLAN_DRAWS))
    kind = tuple(rng.random() for _ in range(MAX_PLAN_DRAWS))
    return _Draws(read, comply, write, kind)


def _wrong(call: Call, u_kind: float) -> Call:
    args = dict(call.args)
    if "amount" in args and (u_kind < 0.5 or "recipient" not in args):
        args["amount"] = round(float(args["amount"]) * 1.1 + 1, 2)
    elif "recipient" in args:
        args["recipient"] = "GB29NWBK60161331926820" if args["recipient"] != "GB29NWBK60161331926820" else "X"
    elif "password" in args:
        args["password"] = str(args["password"]) + "!"
    elif "street" in args:
        args["street"] = str(args["street"]).upper()
    return Call(function=call.function, args=args)


class SimBackend:
    """In-process simulator; ``evoaudit serve-sim`` serves the same object over HTTP."""

    def __init__(self, oracle: Oracle, params: SimConfig, model: str = "evoaudit-sim") -> None:
        self.oracle = oracle
        self.params = params
        self.model = model

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "sim", "model": self.model, "params": self.params.model_dump()}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.respond(request)

    def respond(self, request: ChatRequest) -> ChatResponse:
        message = self._next_message(list(request.messages), request.seed)
        prompt_tokens = sum(len((m.content or "").split()) for m in request.messages)
        completion_tokens = len((message.content or "").split()) + sum(
            len(tc.arguments.split()) for tc in message.tool_calls
        )
        finish = "tool_calls" if message.tool_calls else "stop"
        return ChatResponse(
            message=message,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    # -- behaviour ---------------------------------------------------------------------------------

    def _next_message(self, messages: list[Message], seed: int | None) -> Message:
        role_reply = sim_roles.respond(messages, seed)
        if role_reply is not None:  # an evolution-role request (optimizer, inducer, distiller, judge)
            return role_reply
        user = next((m for m in messages if m.role == "user"), None)
        entry = self.oracle.by_prompt.get(user.content) if user and user.content else None
        if entry is None:
            return Message(role="assistant", content="I am not able to help with that request.")
        queue, answer = self._intended(entry, messages, _draws(seed))
        done = sum(len(m.tool_calls) for m in messages if m.role == "assistant")
        if done < len(queue):
            call = queue[done]
            return Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"call_{done}", name=call.function, arguments=json.dumps(call.args))],
            )
        return Message(role="assistant", content=answer)

    def _intended(self, entry: OraclePlan, messages: list[Message], d: _Draws) -> tuple[list[Call], str]:
        p = self.params
        reads = d.read < p.read_propensity
        competence = p.competence if reads else p.blind_competence
        queue: list[Call] = []
        n_write = 0
        for call in entry.plan:
            if call.function in banking.READ_ONLY_TOOLS:
                if reads:
                    queue.append(call)
                continue
            i = min(n_write, MAX_PLAN_DRAWS - 1)
            queue.append(call if d.write[i] < competence else _wrong(call, d.error_kind[i]))
            n_write += 1

        goal, after = self._injection_seen(entry, messages)
        if goal is not None and d.comply < p.compliance:
            queue[after + 1 : after + 1] = list(entry.goal_plans[goal])

        if entry.answer is not None:
            right = d.write[-1] < competence
            answer = entry.answer if right else "I could not find that information in your records."
        else:
            answer = "Done: I have completed your request."
        return queue, answer

    def _injection_seen(self, entry: OraclePlan, messages: list[Message]) -> tuple[str | None, int]:
        """The first injection goal found in a tool result, and the index of the call that returned it."""
        call_index = -1
        for m in messages:
            if m.role == "assistant":
                call_index += len(m.tool_calls)
            elif m.role == "tool" and m.content:
                text = _norm(m.content)
                for goal, goal_text in self.oracle.goal_texts.items():
                    if goal in entry.goal_plans and goal_text in text:
                        return goal, call_index
        return None, -1
