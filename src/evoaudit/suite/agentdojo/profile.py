"""AgentDojo's own runner as an agent profile (``agent.profile: agentdojo``): its default system message,
its OpenAI client's request shape, its tool executor's handling of a call, all run from AgentDojo's code.

What the runner does (``agentdojo.agent_pipeline``: SystemMessage, InitQuery, OpenAILLM,
ToolsExecutionLoop([ToolsExecutor, OpenAILLM]); ``TaskSuite.run_task_with_pipeline``) and this profile
reproduces through ``interface.AgentProfile``:

- the system message is ``load_system_message(None)`` (AgentDojo's default), byte for byte;
- every message goes out through OpenAILLM's own converter (``_message_to_openai``): the system message as
  role ``developer``, text as a list of content parts, an assistant turn's calls with their arguments
  dumped again from the parsed (and converted) object, a tool result's error in place of its content;
- the request body is what ``chat_completion_request`` asks its client for (run against a client that
  records the keyword arguments), and the tools are OpenAILLM's own schemas (``_function_to_openai``);
- a call is handled by AgentDojo's own ``ToolsExecutor.query`` over a runtime whose tool table is the
  suite's and whose ``run_function`` runs the call through evoaudit's session: its refusals (an unknown or
  empty tool name) and its conversion of list-like strings are ToolsExecutor's own;
- the number of runs while the final message has no content is counted by running
  ``TaskSuite.run_task_with_pipeline`` once with a pipeline that never answers.

Named differences (AgentDojo's runner raises where evoaudit must go on): arguments that are not JSON are
not executed and the model is told the decoder's error; arguments that are JSON but not an object (null,
5, "x", [1]) are executed as ``{}`` (AgentDojo's ``FunctionCall`` would refuse them with a pydantic
ValidationError that ends its whole benchmark run).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import ToolsExecutor
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.types import (
    ChatAssistantMessage,
    ChatSystemMessage,
    ChatToolResultMessage,
    ChatUserMessage,
    get_text_content_as_str,
    text_content_block_from_string,
)

from evoaudit.records import Message
from evoaudit.suite.interface import RunnerCall
from evoaudit.tool_args import ArgumentsError, parse_arguments


class AgentDojoProfile:
    """``interface.AgentProfile`` for a suite of AgentDojo's (its task suite's tools)."""

    def __init__(self, task_suite: Any) -> None:
        # AgentDojo's runner module and its OpenAI client module import the provider SDKs (about 2 s per
        # process), so only a job that runs this profile imports them (``evoaudit._deferred_imports``).
        from agentdojo.agent_pipeline.agent_pipeline import load_system_message
        from agentdojo.agent_pipeline.llms import openai_llm

        self._suite = task_suite
        self._openai = openai_llm
        self.system_message = load_system_message(None)

    @functools.cached_property
    def attempts(self) -> int:
        return _count_runs(self._suite)

    @functools.cached_property
    def _tools(self) -> tuple[dict[str, Any], ...]:
        return tuple(dict(self._openai._function_to_openai(f)) for f in self._suite.tools)

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return self._tools

    def request_body(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        temperature: float,
    ) -> dict[str, Any]:
        client = _CapturingClient()
        self._openai.chat_completion_request(client, model, list(messages), list(tools), None, temperature)  # type: ignore[arg-type]
        return client.body

    def run_call(
        self, name: str, arguments: str, call: Callable[[str, dict[str, Any]], tuple[str, str | None]]
    ) -> RunnerCall:
        try:
            args = parse_arguments(arguments)
        except ArgumentsError as exc:
            return RunnerCall(args=None, text=str(exc), error=str(exc))
        if not isinstance(args, dict):
            args = {}  # a named difference (module docstring)
        runtime = _SessionRuntime(self._suite.tools, call)
        function_call = FunctionCall(function=name, args=args, id="call")
        asked = ChatAssistantMessage(role="assistant", content=None, tool_calls=[function_call])
        _, _, _, messages, _ = ToolsExecutor().query("", runtime, messages=[asked])
        result = messages[-1]
        error = result["error"]
        text = error if error else get_text_content_as_str(result["content"])
        return RunnerCall(args=dict(result["tool_call"].args), text=text, error=error)

    def wire_message(
        self, message: Message, *, call_args: Sequence[dict[str, Any] | None] = (), error: bool = False
    ) -> dict[str, Any]:
        # OpenAILLM passes its model name to the converter, which does not use it.
        return dict(self._openai._message_to_openai(_chat_message(message, call_args, error), ""))


class _SessionRuntime(FunctionsRuntime):
    """AgentDojo's runtime with the suite's tool table whose calls run through evoaudit's session: the text
    goes back unchanged through ToolsExecutor's formatter (``str`` of a string)."""

    def __init__(
        self, functions: Sequence[Any], call: Callable[[str, dict[str, Any]], tuple[str, str | None]]
    ):
        super().__init__(list(functions))
        self._call = call

    def run_function(self, env: Any, function: str, kwargs: Any, raise_on_error: bool = False) -> Any:
        text, error = self._call(function, dict(kwargs))
        return ("", error) if error else (text, None)


class _CapturingClient:
    """An OpenAI client whose ``chat.completions.create`` records its keyword arguments as a request body
    (the ones left NOT_GIVEN are not sent)."""

    def __init__(self) -> None:
        self.body: dict[str, Any] = {}
        self.chat = self
        self.completions = self

    def create(self, **kwargs: Any) -> None:
        from openai._types import NotGiven

        self.body = {k: v for k, v in kwargs.items() if not isinstance(v, NotGiven)}


class _NoOutput(BasePipelineElement):
    """A pipeline that never answers: how often ``run_task_with_pipeline`` runs it is its re-run count."""

    def __init__(self) -> None:
        self.runs = 0

    def query(self, query, runtime, env=None, messages=(), extra_args=None):  # type: ignore[override]
        self.runs += 1
        silent = ChatAssistantMessage(role="assistant", content=None, tool_calls=None)
        return query, runtime, env, [silent], extra_args or {}


@functools.cache
def _count_runs(task_suite: Any) -> int:
    pipeline = _NoOutput()
    user_task = next(iter(task_suite.user_tasks.values()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task_suite.run_task_with_pipeline(pipeline, user_task, None, {})
    return pipeline.runs


def _blocks(text: str | None) -> list[Any] | None:
    return None if text is None else [text_content_block_from_string(text)]


def _chat_message(message: Message, call_args: Sequence[dict[str, Any] | None], error: bool) -> Any:
    """Our message as AgentDojo's own ChatMessage, the form its client converts."""
    if message.role == "system":
        return ChatSystemMessage(role="system", content=_blocks(message.content) or [])
    if message.role == "user":
        return ChatUserMessage(role="user", content=_blocks(message.content) or [])
    if message.role == "assistant":
        calls = [
            _function_call(tc.name, tc.arguments, tc.id, call_args[i] if i < len(call_args) else None)
            for i, tc in enumerate(message.tool_calls)
        ]
        content = _blocks(message.content)
        return ChatAssistantMessage(role="assistant", content=content, tool_calls=calls or None)
    if message.role == "tool":
        call = FunctionCall(function=message.name or "", args={}, id=message.tool_call_id)
        text = message.content or ""
        return ChatToolResultMessage(
            role="tool",
            content=[text_content_block_from_string("" if error else text)],
            tool_call_id=message.tool_call_id,
            tool_call=call,
            error=text if error else None,
        )
    raise ValueError(f"no AgentDojo message for role {message.role!r}")


def _function_call(name: str, arguments: str, call_id: str, executed: dict[str, Any] | None) -> Any:
    if executed is None:  # arguments that do not parse (AgentDojo's own client would raise on them)
        try:
            executed = parse_arguments(arguments)
        except ArgumentsError:
            executed = {}
    if not isinstance(executed, dict):  # JSON but not an object: executed as {} (module docstring)
        executed = {}
    return FunctionCall(function=name, args=executed, id=call_id)
