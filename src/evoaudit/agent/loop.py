"""The executor loop: a model, a suite's real tools and environment, native tool calls.

The loop reaches tools only through a ``ToolSession`` the suite opens over an environment
(``suite.interface``): in process for Banking (AgentDojo's own runtime), or over a transport.

The default loop deliberately does not do what AgentDojo's ``run_task_with_pipeline`` does when the final
message is empty (re-run the whole pipeline on the already-mutated environment, which would double every
side effect); ``agent.profile: agentdojo`` does it, for parity with that runner (``run_runner_episode``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from evoaudit.agent.profile import agent_profile
from evoaudit.agent.prompt import opening_messages
from evoaudit.config import AgentConfig, SuiteConfig
from evoaudit.models.base import ChatBackend, ChatRequest, InfraFailure
from evoaudit.models.text_calls import find_text_calls
from evoaudit.records import ExecutedCall, Instance, Message, Usage, recordable
from evoaudit.suite.defenses import MONITOR_SYSTEM, Defense, monitor_score
from evoaudit.suite.interface import AgentProfile, AuditSuite, FileEffectsSession, ToolSession
from evoaudit.tool_args import ArgumentsError, parse_arguments

# A tool call written as text instead of a native call: an <action> envelope, a fenced or bare
# ``tool_name(...)`` call of a known tool, or a JSON object naming one.
_ENVELOPE = re.compile(r"<\s*/?\s*action\s*>", re.IGNORECASE)


def textual_action(text: str | None, tool_names: set[str]) -> bool:
    if not text:
        return False
    if _ENVELOPE.search(text):
        return True
    # Hermes <tool_call>, Llama-3 JSON, Mistral [TOOL_CALLS] naming a known tool (models.text_calls).
    if find_text_calls(text, tool_names) is not None:
        return True
    names = "|".join(map(re.escape, sorted(tool_names)))
    return bool(names) and re.search(rf"\b({names})\s*\(", text) is not None


@dataclass
class Episode:
    messages: list[Message]
    calls: list[ExecutedCall] = field(default_factory=list)
    final_output: str = ""
    steps: int = 0
    step_limit_hit: bool = False
    timer_hit: bool = False
    textual_action: bool = False
    infra_failure: str | None = None
    infra_failure_detail: str | None = None
    usage: Usage = field(default_factory=Usage)
    wall_s: float = 0.0


async def run_episode(
    backend: ChatBackend,
    messages: list[Message],
    session: ToolSession,
    *,
    max_steps: int,
    seed: int | None,
    defense: Defense | None = None,
    time_limit_s: float | None = None,
) -> Episode:
    """Run the model until it answers without a tool call, the step limit, the wall-clock limit
    (``time_limit_s``, None: none) or an infrastructure failure.

    The time limit is checked before each request: a request or a tool call under way is not cut short,
    so an episode may overrun it by one step; one stopped by it has ``timer_hit``.

    The session's environment is mutated in place: it is the terminal state when this returns. A
    ``defense`` changes what the model receives (each tool message's text, and user messages after a round
    of tool results); the executed calls keep the runtime's own text.

    Long on purpose: the hot path (benchmarks/harness_overhead.py); one loop whose state every branch updates.
    """
    tools = session.schemas()
    tool_names = {t["function"]["name"] for t in tools}
    ep = Episode(messages=list(messages))
    start = time.perf_counter()
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}
    kept: set[str] | None = None  # the tools a tool filter kept; None: every tool is offered
    if defense is not None and defense.filters_tools:
        # AgentDojo's tool_filter, through this loop's own client: the question and the answer stay in the
        # conversation, and only the tools the answer names are offered from then on.
        question = Message(role="user", content=defense.filter_prompt())
        request = ChatRequest(messages=(*ep.messages, question), tools=tools, seed=seed, tool_choice="none")
        try:
            response = await backend.complete(request)
        except InfraFailure as failure:
            ep.infra_failure, ep.infra_failure_detail = failure.kind, failure.detail
            ep.usage = Usage(**usage)
            ep.wall_s = time.perf_counter() - start
            return ep
        usage["requests"] += 0 if response.cached else 1
        usage["prompt_tokens"] += response.prompt_tokens
        usage["completion_tokens"] += response.completion_tokens
        # Only its text: a call the model made anyway is not part of the answer (and is never run).
        ep.messages += [question, Message(role="assistant", content=response.message.content or "")]
        kept = defense.kept_tools(response.message.content, tool_names)
        tools = [t for t in tools if t["function"]["name"] in kept]
    while True:
        if ep.steps >= max_steps:
            ep.step_limit_hit = True
            break
        if _out_of_time(start, time_limit_s):
            ep.timer_hit = True
            break
        request = ChatRequest(messages=tuple(ep.messages), tools=tools, seed=seed)
        try:
            response = await backend.complete(request)
        except InfraFailure as failure:
            ep.infra_failure = failure.kind
            ep.infra_failure_detail = failure.detail
            break
        ep.steps += 1
        usage["requests"] += 0 if response.cached else 1
        usage["prompt_tokens"] += response.prompt_tokens
        usage["completion_tokens"] += response.completion_tokens
        reply = response.message
        ep.messages.append(reply)
        # A call written as text is recorded, never executed; native calls beside it still run.
        ep.textual_action = (
            ep.textual_action or reply.tool_calls_from_text or textual_action(reply.content, tool_names)
        )
        if not reply.tool_calls:
            ep.final_output = reply.content or ""
            break
        for tc in reply.tool_calls:
            if kept is not None and tc.name not in kept:  # the runtime no longer offers it: not run
                error = defense.filtered_out(tc.name)  # type: ignore[union-attr]
                ep.calls.append(
                    ExecutedCall(call_id=tc.id, function=tc.name, args=_args_of(tc.arguments), error=error)
                )
            else:
                ep.calls.append(_execute(tc.id, tc.name, tc.arguments, session))
            executed = ep.calls[-1]
            text = executed.error or executed.result
            flagged = False
            if defense is not None and defense.monitors:
                # llm_monitor: the model screens the output in a request of its own before the agent sees it.
                try:
                    score, asked = await screen(backend, text, seed)
                except InfraFailure as failure:
                    ep.infra_failure, ep.infra_failure_detail = failure.kind, failure.detail
                    break
                for k, v in asked.items():
                    usage[k] += v
                ep.calls[-1] = executed = executed.model_copy(update={"monitor_score": score})
                flagged = defense.flagged(score)
            ep.messages.append(
                Message(
                    role="tool",
                    tool_call_id=tc.id,
                    name=tc.name,
                    content=defense.tool_output(text, flagged) if defense is not None else text,
                )
            )
        if ep.infra_failure is not None:
            break
        if defense is not None:
            prompt = next((m.content or "" for m in ep.messages if m.role == "user"), "")
            ep.messages.extend(Message(role="user", content=t) for t in defense.after_tools(prompt))
    ep.usage = Usage(**usage)
    ep.wall_s = time.perf_counter() - start
    return ep


async def run_runner_episode(
    backend: ChatBackend,
    messages: list[Message],
    session: ToolSession,
    profile: AgentProfile,
    *,
    max_steps: int,
    seed: int | None,
    time_limit_s: float | None = None,
) -> Episode:
    """``run_episode`` as a benchmark's own runner runs it (``agent.profile``; ``interface.AgentProfile``).

    The requests carry the runner's message shapes and tool schemas; a call is executed as the runner's
    executor does (``profile.run_call``); the calls of the ``max_steps``-th turn are not executed (the
    runner's loop stops before them); and while the final message has no content the episode is run again
    from the opening messages, on the environment the last run left, up to ``profile.attempts`` runs in
    all. The episode records every run's messages and calls, in order; a call id an earlier run already
    used is renamed in the record (the requests carry the server's own), so ids are unique in the episode.

    Long on purpose: ``run_episode``'s loop in a runner's shapes; kept beside it, line for line comparable."""
    tools = profile.tool_schemas()
    tool_names = {t["function"]["name"] for t in tools}
    ep = Episode(messages=[])
    start = time.perf_counter()
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}
    reply: Message | None = None
    used: set[str] = set()  # call ids of the runs before this one
    for run in range(profile.attempts):
        convo = list(messages)
        wire = [profile.wire_message(m) for m in convo]
        ep.messages.extend(convo)
        turns = 0
        while True:
            if _out_of_time(start, time_limit_s):
                ep.timer_hit = True
                reply = None
                break
            request = ChatRequest(
                messages=tuple(convo),
                tools=tools,
                seed=seed,
                runner_messages=tuple(wire),
                runner_body=profile.request_body,
            )
            try:
                response = await backend.complete(request)
            except InfraFailure as failure:
                ep.infra_failure = failure.kind
                ep.infra_failure_detail = failure.detail
                reply = None
                break
            ep.steps += 1
            turns += 1
            usage["requests"] += 0 if response.cached else 1
            usage["prompt_tokens"] += response.prompt_tokens
            usage["completion_tokens"] += response.completion_tokens
            reply = response.message
            recorded = _unique_call_ids(reply, used, run)
            convo.append(reply)
            ep.messages.append(recorded)
            ep.textual_action = (
                ep.textual_action or reply.tool_calls_from_text or textual_action(reply.content, tool_names)
            )
            if not reply.tool_calls:
                break
            if turns >= max_steps:
                ep.step_limit_hit = True
                break
            results: list[tuple[Message, Message, bool]] = []
            sent: list[dict[str, Any] | None] = []
            for tc, rc in zip(reply.tool_calls, recorded.tool_calls, strict=True):
                executed, args = _execute_as_runner(rc.id, tc.name, tc.arguments, session, profile)
                ep.calls.append(executed)
                sent.append(args)
                text = executed.error or executed.result
                result = Message(role="tool", tool_call_id=tc.id, name=tc.name, content=text)
                kept = result.model_copy(update={"tool_call_id": rc.id})
                results.append((result, kept, bool(executed.error)))
            wire.append(profile.wire_message(reply, call_args=sent))
            for msg, kept, error in results:
                convo.append(msg)
                ep.messages.append(kept)
                wire.append(profile.wire_message(msg, error=error))
        used |= {tc.id for m in ep.messages for tc in m.tool_calls}
        if ep.infra_failure is not None or ep.timer_hit or (reply is not None and reply.content is not None):
            break
    ep.final_output = (reply.content if reply is not None else None) or ""
    ep.usage = Usage(**usage)
    ep.wall_s = time.perf_counter() - start
    return ep


async def screen(backend: ChatBackend, text: str, seed: int | None) -> tuple[int, dict[str, int]]:
    """llm_monitor's question about one tool output, asked of ``backend`` (the executor's model): its score
    (``suite.defenses.monitor_score``) and the usage it took."""
    request = ChatRequest(
        messages=(Message(role="system", content=MONITOR_SYSTEM), Message(role="user", content=text)),
        tools=(),
        seed=seed,
    )
    response = await backend.complete(request)
    usage = {
        "requests": 0 if response.cached else 1,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
    }
    return monitor_score(response.message.content), usage


def _out_of_time(start: float, time_limit_s: float | None) -> bool:
    return time_limit_s is not None and time.perf_counter() - start >= time_limit_s


def _unique_call_ids(reply: Message, used: set[str], run: int) -> Message:
    """``reply`` with every call id an earlier run used renamed (``<id>.run<N>``, then a counter)."""
    if not any(tc.id in used for tc in reply.tool_calls):
        return reply
    taken = used | {tc.id for tc in reply.tool_calls}
    calls = []
    for tc in reply.tool_calls:
        if tc.id in used:
            new, n = f"{tc.id}.run{run}", 0
            while new in taken:
                n += 1
                new = f"{tc.id}.run{run}.{n}"
            taken.add(new)
            tc = tc.model_copy(update={"id": new})
        calls.append(tc)
    return reply.model_copy(update={"tool_calls": calls})


async def run_instance(
    backend: ChatBackend,
    system: str,
    instance: Instance,
    suite: AuditSuite,
    attack: str | None,
    injections: dict[str, str],
    suite_cfg: SuiteConfig | None = None,
    *,
    agent: AgentConfig | None = None,
    max_steps: int,
    seed: int | None,
    defense: Defense | None = None,
    time_limit_s: float | None = None,
) -> tuple[Any, Any, Episode]:
    """One episode of ``instance`` from its (attacked) fixture: (pre-state, terminal state, episode).

    ``suite_cfg`` (the ``suite`` section) is handed to ``suite.open_tools`` (it may choose the transport);
    ``agent`` (the ``agent`` section) names the runner profile; a ``defense`` rewrites the system message and
    what the model receives (``suite.defenses``)."""
    env = suite.build_environment(instance, attack, injections)
    pre = suite.copy_environment(env)
    session = suite.open_tools(env, suite_cfg)
    profile = agent_profile(suite, agent)
    opening = opening_messages(
        defense.system(system) if defense is not None else system, suite.prompt_for(instance, attack)
    )
    try:
        if profile is None:
            episode = await run_episode(
                backend,
                opening,
                session,
                max_steps=max_steps,
                seed=seed,
                defense=defense,
                time_limit_s=time_limit_s,
            )
        elif defense is not None:  # the configuration refuses the pair; a direct caller is told so
            raise ValueError(f"an agent profile runs no defence; {defense.name!r} was asked for")
        else:
            episode = await run_runner_episode(
                backend, opening, session, profile, max_steps=max_steps, seed=seed, time_limit_s=time_limit_s
            )
    finally:
        session.close()
    return pre, env, episode


def _args_of(arguments: str) -> dict | None:
    """A call's arguments as recorded (``_execute``'s reading): a JSON object, else None."""
    try:
        args = parse_arguments(arguments)
    except ArgumentsError:
        return None
    return recordable(args) if isinstance(args, dict) else None


def _execute(call_id: str, name: str, arguments: str, session: ToolSession) -> ExecutedCall:
    """Malformed arguments are the agent's failure: the model is told the error, as a real runtime would
    (``tool_args``: strict JSON, no non-finite numbers)."""
    try:
        args = parse_arguments(arguments)
    except ArgumentsError as exc:
        return ExecutedCall(call_id=call_id, function=name, args=None, error=str(exc))
    if not isinstance(args, dict):
        return ExecutedCall(
            call_id=call_id,
            function=name,
            args=None,
            error="ValueError: tool arguments must be a JSON object",
        )
    text, error = session.call(name, args)
    # JSON's "\\ud800" decodes to a lone surrogate, which no UTF-8 record can hold: kept as its escape
    # (the tools refuse such text, so nothing else of the episode holds it).
    args = recordable(args)
    # What the call's program changed in the workspace, for replay to write where a re-run differs.
    effects = session.file_effects() if isinstance(session, FileEffectsSession) else []
    if error:
        return ExecutedCall(call_id=call_id, function=name, args=args, error=error, file_effects=effects)
    return ExecutedCall(call_id=call_id, function=name, args=args, result=text, file_effects=effects)


def _execute_as_runner(
    call_id: str, name: str, arguments: str, session: ToolSession, profile: AgentProfile
) -> tuple[ExecutedCall, dict[str, Any] | None]:
    """A call as the runner's executor makes it: (the record, the arguments as executed, which the runner's
    next request carries; None when they did not parse)."""
    done = profile.run_call(name, arguments, session.call)
    args = None if done.args is None else recordable(done.args)
    if done.error:
        return ExecutedCall(call_id=call_id, function=name, args=args, error=done.error), done.args
    return ExecutedCall(call_id=call_id, function=name, args=args, result=done.text), done.args
