"""The executor loop: a model, a suite's real tools and environment, native tool calls.

The loop reaches tools only through a ``ToolSession`` the suite opens over an environment
(``suite.interface``): in process for Banking (AgentDojo's own runtime), or over a transport.

AgentDojo's ``run_task_with_pipeline`` is deliberately not used: when the final message is empty it
re-runs the whole pipeline on the already-mutated environment, which would double every side effect.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from evoaudit.agent.prompt import opening_messages
from evoaudit.models.base import ChatBackend, ChatRequest, InfraFailure
from evoaudit.models.text_calls import find_text_calls
from evoaudit.records import ExecutedCall, Instance, Message, Usage, recordable
from evoaudit.suite.defenses import Defense
from evoaudit.suite.interface import AuditSuite, ToolSession

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
) -> Episode:
    """Run the model until it answers without a tool call, the step limit, or an infrastructure failure.

    The session's environment is mutated in place: it is the terminal state when this returns. A
    ``defense`` changes what the model receives (each tool message's text, and user messages after a round
    of tool results); the executed calls keep the runtime's own text.
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
            ep.messages.append(
                Message(
                    role="tool",
                    tool_call_id=tc.id,
                    name=tc.name,
                    content=defense.tool_output(text) if defense is not None else text,
                )
            )
        if defense is not None:
            prompt = next((m.content or "" for m in ep.messages if m.role == "user"), "")
            ep.messages.extend(Message(role="user", content=t) for t in defense.after_tools(prompt))
    ep.usage = Usage(**usage)
    ep.wall_s = time.perf_counter() - start
    return ep


async def run_instance(
    backend: ChatBackend,
    system: str,
    instance: Instance,
    suite: AuditSuite,
    attack: str | None,
    injections: dict[str, str],
    cfg: Any = None,
    *,
    max_steps: int,
    seed: int | None,
    defense: Defense | None = None,
) -> tuple[Any, Any, Episode]:
    """One episode of ``instance`` from its (attacked) fixture: (pre-state, terminal state, episode).

    ``cfg`` is handed to ``suite.open_tools`` (it may choose the transport); a ``defense`` rewrites the
    system message and what the model receives (``suite.defenses``)."""
    env = suite.build_environment(instance, attack, injections)
    pre = suite.copy_environment(env)
    session = suite.open_tools(env, cfg)
    try:
        episode = await run_episode(
            backend,
            opening_messages(
                defense.system(system) if defense is not None else system, suite.prompt_for(instance, attack)
            ),
            session,
            max_steps=max_steps,
            seed=seed,
            defense=defense,
        )
    finally:
        session.close()
    return pre, env, episode


def _args_of(arguments: str) -> dict | None:
    """A call's arguments as recorded (``_execute``'s reading): a JSON object, else None."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return None
    return recordable(args) if isinstance(args, dict) else None


def _execute(call_id: str, name: str, arguments: str, session: ToolSession) -> ExecutedCall:
    """Malformed arguments are the agent's failure: the model is told the error, as a real runtime would."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return ExecutedCall(call_id=call_id, function=name, args=None, error=f"JSONDecodeError: {exc}")
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
    if error:
        return ExecutedCall(call_id=call_id, function=name, args=args, error=error)
    return ExecutedCall(call_id=call_id, function=name, args=args, result=text)
