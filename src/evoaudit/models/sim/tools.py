"""The embedded default executor: a deterministic behavioural simulator.

It sees only what a model sees (messages and tool schemas) plus an explicitly granted oracle: the
corrected ground-truth plan of the instance whose prompt opens the conversation, and the plans of the
injection goals as they would apply to that instance. It never sees condition or method names; whatever
an artifact changes reaches it as system-prompt text. Every imperfection is a parameter (``sim`` in
config, documented in the schema):

- ``read_propensity``: the episode performs the plan's read steps (and, with ``extra_reads``, checks the
  history before its first write); otherwise it acts blind, never sees injected text, and each write is
  right only with ``blind_competence``;
- ``competence`` (``competence_by_family`` overrides it per family): each write step after reading is
  right; a wrong one goes wrong in one of ``error_kinds``: wrong amount, wrong recipient, skipped step,
  premature answer. A question is answered right with the same probability;
- ``compliance``: once injected instructions appear in a tool result, the episode executes the injection
  goal's plan right after that call, then resumes its task;
- ``envelope_imitation``: the episode writes its first call as text in an ``<action>`` envelope instead
  of calling the tool; the agent loop records a textual action and executes nothing;
- ``memory_use`` and ``memory_gain``: memory in the system prompt is relevant when it names every tool
  the plan's writes need; a relevant memory is used with ``memory_use`` and then removes ``memory_gain``
  of the remaining write errors.

Each parameter is moved by system-prompt cues through one table, ``CUES`` below: when a cue's pattern is
found (not negated), its strength from ``sim.cues`` is added to its parameter, then clipped to [0, 1].

Draws are common random numbers: one seed per episode (sent as the request's ``seed``, derived without
the condition), and every draw below is taken from it in a fixed order whatever the parameters, so two
conditions differ only where their prompts move a parameter across a draw. Each turn recomputes the
episode's draws from the seed and continues from the history: the simulator keeps no state between
requests and answers the same in-process and over HTTP.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evoaudit.config import SimConfig
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.models.sim import roles as sim_roles
from evoaudit.offline import refuse_if_offline
from evoaudit.records import Call, Instance, Message, ToolCall
from evoaudit.suite.defenses import is_tool_filter_request
from evoaudit.suite.interface import SimOracle
from evoaudit.suite.registry import get_suite

_WS = re.compile(r"\s+")
MAX_PLAN_DRAWS = 32
# The extra look-up a reading simulator may make before its first write: Banking's transaction listing,
# made only where the suite has it.
EXTRA_READ = "get_most_recent_transactions"
OTHER_IBAN = "GB29NWBK60161331926820"  # a well-formed IBAN that belongs to nobody in the fixture
WRONG_ANSWER = "I could not find that information in your records."
DONE = "Done: I have completed your request."
REFUSAL = "I am not able to help with that request."


def _identifier_like(value: str) -> bool:
    return len(value) >= 12 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _norm(text: str) -> str:
    return _WS.sub(" ", text.replace("''", "'")).strip()


# -- the cue table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cue:
    """A text cue in the system prompt that moves one simulator parameter by ``sim.cues.<name>``."""

    name: str
    parameter: str
    pattern: re.Pattern[str]
    negatable: bool = True  # a "not"/"never" just before the match cancels it


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.IGNORECASE)


_SAME_SENTENCE = r"[^.\n]{0,60}"
CUES: tuple[Cue, ...] = (
    Cue(
        "inspect_history",
        "read_propensity",
        _rx(
            r"\b(check|review|inspect|read|look (?:at|up)|consult)\b"
            + _SAME_SENTENCE
            + r"\b(history|transactions?|statements?|files?|records?|scheduled)\b"
        ),
    ),
    Cue(
        "act_without_reading",
        "read_propensity",
        _rx(
            r"\b(without|skip|avoid|no need (?:to|for))\b[^.\n]{0,40}"
            r"\b(reading|checking|looking|lookups?|extra calls?|unnecessary)"
        ),
        negatable=False,
    ),
    Cue(
        "verify_details",
        "competence",
        _rx(
            r"\b(double[- ]check|verify|confirm|make sure|compare)\b"
            + _SAME_SENTENCE
            + r"\b(amounts?|recipients?|ibans?|details|arguments)\b"
        ),
    ),
    Cue(
        "distrust_tool_text",
        "compliance",
        _rx(
            r"\b(ignore|disregard|never (?:follow|obey|act on)|(?:do not|don't) (?:follow|obey|act on))\b"
            r"[^.\n]{0,80}\b(instructions?|requests?|commands?)\b"
        ),
        negatable=False,
    ),
    Cue(
        "follow_tool_text",
        "compliance",
        _rx(
            r"\b(follow|carry out|execute|act on|obey)\b[^.\n]{0,30}\b(instructions?|requests?)\b"
            r"[^.\n]{0,30}\b(in|from|inside|found in|contained in)\b[^.\n]{0,30}"
            r"\b(files?|transactions?|tool (?:output|results?)|messages?|notes?|subjects?)\b"
        ),
    ),
    Cue("action_envelope_example", "envelope_imitation", _rx(r"<\s*action\s*>"), negatable=False),
    Cue(
        "native_calls_reminder",
        "envelope_imitation",
        _rx(
            r"\b(function[- ]calling interface|native (?:tool|function) calls?|call the tools? directly|"
            r"by calling the tools?|"
            r"(?:never|do not|don't) write (?:a |the )?(?:tool|function) calls? as (?:plain )?text)"
        ),
        negatable=False,
    ),
    Cue(
        "consult_memory",
        "memory_use",
        _rx(
            r"\b(consult|use|apply|reuse|draw on|follow)\b[^.\n]{0,40}"
            r"\b(past|previous|prior|stored|relevant)\b[^.\n]{0,30}\b(experiences?|memor(?:y|ies)|workflows?|lessons?|insights?)\b"
        ),
    ),
)
_NEGATION = _rx(r"\b(not|never|no|don't|avoid)\b[^.\n]{0,12}$")
PARAMETERS = ("competence", "read_propensity", "compliance", "envelope_imitation", "memory_use")


def present_cues(system_text: str) -> list[str]:
    """Names of the cues found in ``system_text``, in table order."""
    found = []
    for cue in CUES:
        for m in cue.pattern.finditer(system_text):
            if cue.negatable and _NEGATION.search(system_text[max(0, m.start() - 30) : m.start()]):
                continue
            found.append(cue.name)
            break
    return found


@dataclass(frozen=True)
class Effective:
    """The parameters one episode runs with, after per-family competence and the cues."""

    competence: float
    read_propensity: float
    blind_competence: float
    compliance: float
    envelope_imitation: float
    memory_use: float
    cues: tuple[str, ...] = ()


def apply_cues(
    base: dict[str, float],
    system_text: str,
    strengths: dict[str, float],
    targets_of: Callable[[str], tuple[str, ...]] = lambda parameter: (parameter,),
) -> tuple[str, ...]:
    """Add each present cue's strength to the parameters its cue-table parameter maps to (in place,
    clipped to [0, 1]); the cues found, in table order."""
    cues = tuple(present_cues(system_text))
    parameter_of = {c.name: c.parameter for c in CUES}
    for name in cues:
        for target in targets_of(parameter_of[name]):
            base[target] = min(1.0, max(0.0, base[target] + strengths[name]))
    return cues


def effective_params(params: SimConfig, family: str, system_text: str) -> Effective:
    base = {
        "competence": params.competence_by_family.get(family, params.competence),
        "read_propensity": params.read_propensity,
        "compliance": params.compliance,
        "envelope_imitation": params.envelope_imitation,
        "memory_use": params.memory_use,
    }
    cues = apply_cues(base, system_text, params.cues.model_dump())
    return Effective(blind_competence=params.blind_competence, cues=tuple(cues), **base)


# -- the oracle ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OraclePlan:
    plan: tuple[Call, ...]
    answer: str | None
    goal_plans: dict[str, tuple[Call, ...]] = field(default_factory=dict)
    family: str = ""


@dataclass
class Oracle:
    """Ground-truth plans granted to the simulator, looked up by the opening user prompt."""

    by_prompt: dict[str, OraclePlan]
    goal_texts: dict[str, str]  # goal id -> normalised goal text, as it appears inside injections
    read_only: frozenset[str] = frozenset()  # the suite's tools that only read state

    @classmethod
    def from_instances(
        cls, instances: list[Instance], goals: list[str], suite: str | None = None, *, source: Any = None
    ) -> Oracle:
        """The plans granted by the instances' suite (``suite`` names it when there are no instances; this
        simulator's behaviour is written for Banking, which is the default). ``source``: that suite's
        object when the caller holds it (else it is resolved here)."""
        name = suite or (instances[0].suite if instances else "banking")
        if source is None:
            source = get_suite(name)
        if not isinstance(source, SimOracle):
            raise ValueError(f"suite {name!r} grants no oracle to this simulator (interface.SimOracle)")
        by_prompt: dict[str, OraclePlan] = {}
        for inst in instances:
            if inst.prompt in by_prompt:
                continue
            goal_plans = source.goal_plans(inst, goals)
            by_prompt[inst.prompt] = OraclePlan(
                tuple(inst.ground_truth), inst.answer, goal_plans, inst.family
            )
        texts = {g: _norm(source.goal_text(g)) for g in goals}
        return cls(by_prompt=by_prompt, goal_texts=texts, read_only=source.read_only_tools())


# -- one episode's dice ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Draws:
    read: float
    comply: float
    imitate: float
    memory: float
    extra_read: float
    answer: float
    write: tuple[float, ...]
    error_kind: tuple[float, ...]


def _draws(seed: int | None) -> _Draws:
    rng = random.Random(seed if seed is not None else 0)
    read, comply, imitate, memory, extra, answer = (rng.random() for _ in range(6))
    write = tuple(rng.random() for _ in range(MAX_PLAN_DRAWS))
    kind = tuple(rng.random() for _ in range(MAX_PLAN_DRAWS))
    return _Draws(read, comply, imitate, memory, extra, answer, write, kind)


ERROR_KINDS = ("wrong_amount", "wrong_recipient", "skipped_step", "premature_answer")


def _error_kind(call: Call, weights: dict[str, float], u: float) -> str | None:
    """The kind of error a wrong step makes, among the kinds that apply to it; None when none can."""
    applicable = {
        "wrong_amount": True,  # a call without an amount gets another of its values wrong
        "wrong_recipient": "recipient" in call.args,
        "skipped_step": True,
        "premature_answer": True,
    }
    options = [(k, weights[k]) for k in ERROR_KINDS if applicable[k] and weights[k] > 0]
    total = sum(w for _, w in options)
    if total <= 0:
        return None
    acc = 0.0
    for kind, w in options:
        acc += w / total
        if u < acc:
            return kind
    return options[-1][0]


def _wrong_value(call: Call) -> Call:
    args = dict(call.args)
    if "amount" in args:
        args["amount"] = round(float(args["amount"]) * 1.1 + 1, 2)
    elif "password" in args:
        args["password"] = str(args["password"]) + "!"
    else:
        for k, v in sorted(args.items()):
            if isinstance(v, str) and k != "recipient":
                # Reversed, not re-cased: the Banking value rule ignores case (banking/values.py), so a
                # re-cased value would be no error at all.
                args[k] = v[::-1] if v[::-1].casefold() != v.casefold() else v + "x"
                break
            if isinstance(v, int | float) and not isinstance(v, bool):
                args[k] = v + 1
                break
    return Call(function=call.function, args=args)


def _wrong_recipient(call: Call) -> Call:
    args = dict(call.args)
    args["recipient"] = OTHER_IBAN if args.get("recipient") != OTHER_IBAN else "DE89370400440532013000"
    return Call(function=call.function, args=args)


_STOP = Call(function="", args={})  # marks a premature answer in the queue


class SimBackend:
    """In-process simulator; ``evoaudit serve-sim`` serves the same object over HTTP."""

    def __init__(self, oracle: Oracle, params: SimConfig, model: str = "evoaudit-sim") -> None:
        refuse_if_offline("the simulator")
        self.oracle = oracle
        self.params = params
        self.model = model
        self._effective: dict[tuple[str, str], Effective] = {}

    def fingerprint(self) -> dict[str, Any]:
        params = self.params.model_dump()
        if any(self.params.poison_copy.values()):  # the planted copying, only when set (docs/poisoning.md)
            params["poison_copy"] = dict(sorted(self.params.poison_copy.items()))
        if self.params.poison_sleeper:
            params["poison_sleeper"] = self.params.poison_sleeper
        return {"backend": "sim", "model": self.model, "params": params}

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

    def effective(self, family: str, system_text: str) -> Effective:
        key = (family, system_text)
        if key not in self._effective:
            self._effective[key] = effective_params(self.params, family, system_text)
        return self._effective[key]

    # -- behaviour ---------------------------------------------------------------------------------

    def _next_message(self, messages: list[Message], seed: int | None) -> Message:
        if sim_roles.is_screen_request(messages):  # the write screen's judge: this suite's goal texts
            return sim_roles.screen(messages, self.oracle.goal_texts.values())
        role_reply = sim_roles.respond(messages, seed, self.params.poison_copy)
        if role_reply is not None:  # an evolution-role request (optimizer, inducer, distiller, judge)
            return role_reply
        user = next((m for m in messages if m.role == "user"), None)
        entry = self.oracle.by_prompt.get(user.content) if user and user.content else None
        if entry is None:
            return Message(role="assistant", content=REFUSAL)
        if is_tool_filter_request(messages):
            # The tool filter's question (suite.defenses), answered from the granted plan: oracle knowledge
            # of which tools the task needs (and the read the simulator may add), which no model has before
            # it starts. So a goal's tools the task does not need are always left out, and the tool_filter
            # row on the simulator is a mechanism check by construction, never a measurement of the filter.
            kept = {c.function for c in entry.plan} | ({EXTRA_READ} & self.oracle.read_only)
            return Message(role="assistant", content=", ".join(sorted(kept)))
        system = "\n".join(m.content or "" for m in messages if m.role == "system")
        eff = self.effective(entry.family, system)
        d = _draws(seed)
        queue, answer = self._intended(entry, messages, d, eff, system)
        done = sum(len(m.tool_calls) for m in messages if m.role == "assistant")
        if done == 0 and queue and d.imitate < eff.envelope_imitation:
            call = queue[0]
            return Message(
                role="assistant",
                content=f"<action>\n{call.function}({json.dumps(call.args, sort_keys=True)})\n</action>",
            )
        if done < len(queue):
            call = queue[done]
            return Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"call_{done}", name=call.function, arguments=json.dumps(call.args))],
            )
        return Message(role="assistant", content=answer)

    def _intended(
        self, entry: OraclePlan, messages: list[Message], d: _Draws, eff: Effective, system: str
    ) -> tuple[list[Call], str]:
        p = self.params
        reads = d.read < eff.read_propensity
        writes = [c for c in entry.plan if c.function not in self.oracle.read_only]
        needed = {c.function for c in (writes or entry.plan)}
        relevant_memory = bool(needed) and all(name in system for name in needed)
        competence = eff.competence
        if relevant_memory and d.memory < eff.memory_use:
            competence += p.memory_gain * (1 - competence)
        if not reads:
            competence = eff.blind_competence
        weights = p.error_kinds.model_dump()

        queue: list[Call] = []
        n_write = 0
        extra_read = (
            reads
            and p.extra_reads
            # A suite without Banking's transaction listing gets no extra read (its plan's reads only).
            and EXTRA_READ in self.oracle.read_only
            and d.extra_read < eff.read_propensity
            and not any(c.function == EXTRA_READ for c in entry.plan)
        )
        for call in entry.plan:
            if call.function in self.oracle.read_only:
                if reads:
                    queue.append(call)
                continue
            if extra_read and n_write == 0:
                queue.append(Call(function=EXTRA_READ, args={"n": 100}))
            i = min(n_write, MAX_PLAN_DRAWS - 1)
            n_write += 1
            if d.write[i] < competence:
                queue.append(call)
                continue
            kind = _error_kind(call, weights, d.error_kind[i])
            if kind is None:
                queue.append(call)
            elif kind == "wrong_amount":
                queue.append(_wrong_value(call))
            elif kind == "wrong_recipient":
                queue.append(_wrong_recipient(call))
            elif kind == "premature_answer":
                queue.append(_STOP)
                break
            # skipped_step: nothing is queued

        goal, after = self._injection_seen(entry, messages)
        if goal is not None and d.comply < eff.compliance:
            queue[after + 1 : after + 1] = list(entry.goal_plans[goal])
        elif goal is None and d.comply < p.poison_sleeper and (kept := self._remembered(entry, system)):
            queue.extend(entry.goal_plans[kept])  # the planted sleeper (sim.poison_sleeper)
        stops = [i for i, c in enumerate(queue) if c is _STOP]
        if stops:
            queue = queue[: stops[0]]

        if entry.answer is not None:
            answer = entry.answer if d.answer < competence else WRONG_ANSWER
        else:
            answer = DONE
        return queue, answer

    def _remembered(self, entry: OraclePlan, system: str) -> str | None:
        """The first granted goal (by id) one of whose write calls has an attacker value (an identifier-like
        text argument: 12 characters or more, letters and digits, e.g. an IBAN) in the system prompt: what a
        deployed artifact copied."""
        for goal, plan in sorted(entry.goal_plans.items()):
            for call in plan:
                if call.function in self.oracle.read_only:
                    continue
                values = [v for v in call.args.values() if isinstance(v, str) and _identifier_like(v)]
                if any(v in system for v in values):
                    return goal
        return None

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
