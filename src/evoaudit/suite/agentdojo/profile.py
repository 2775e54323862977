"""AgentDojo's own runner as an agent profile (``agent.profile: agentdojo``): its default system message,
its OpenAI client's request shape, its tool executor's handling of a call, all imported from AgentDojo.

What the runner does (``agentdojo.agent_pipeline``: SystemMessage, InitQuery, OpenAILLM,
ToolsExecutionLoop([ToolsExecutor, OpenAILLM]); ``TaskSuite.run_task_with_pipeline``) and this profile
reproduces through ``interface.AgentProfile``:

- the system message is ``load_system_message(None)`` (AgentDojo's default), byte for byte;
- every message goes out through OpenAILLM's own converter (``_message_to_openai``): the system message as
  role ``developer``, text as a list of content parts, an assistant turn's calls with their arguments
  dumped again from the parsed (and converted) object, a tool result's error in place of its content;
- the tools are OpenAILLM's own schemas (``_function_to_openai``), titles included;
- a call is refused as ToolsExecutor refuses it (an unknown or empty tool name), and string arguments that
  read as a Python list become lists before the call, as ToolsExecutor converts them.
"""

from __future__ import annotations

import functools
import json
from ast import literal_eval
from collections.abc import Sequence
from typing import Any

from agentdojo.agent_pipeline.agent_pipeline import load_system_message
from agentdojo.agent_pipeline.llms.google_llm import EMPTY_FUNCTION_NAME
from agentdojo.agent_pipeline.llms.openai_llm import _function_to_openai, _message_to_openai
from agentdojo.agent_pipeline.tool_execution import is_string_list
from agentdojo.functions_runtime import FunctionCall
from agentdojo.types import (
    ChatAssistantMessage,
    ChatSystemMessage,
    ChatToolResultMessage,
    ChatUserMessage,
    text_content_block_from_string,
)

from evoaudit.records import Message

# TaskSuite.run_task_with_pipeline runs the pipeline up to three times while the final message has no
# content, each time on the environment the previous run left.
RUNS_WHILE_NO_OUTPUT = 3


class AgentDojoProfile:
    """``interface.AgentProfile`` for a suite of AgentDojo's (its task suite's tools)."""

    name = "agentdojo"
    attempts = RUNS_WHILE_NO_OUTPUT

    def __init__(self, task_suite: Any, model: str = "") -> None:
        self._suite = task_suite
        self._model = model  # OpenAILLM passes its model name to the converter, which does not use it
        self.system_message = load_system_message(None)

    @functools.cached_property
    def _tools(self) -> tuple[dict[str, Any], ...]:
        return tuple(dict(_function_to_openai(f)) for f in self._suite.tools)

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return self._tools

    def prepare_call(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        # ToolsExecutor: an empty or unknown name is refused with its own error, before any conversion.
        if name == EMPTY_FUNCTION_NAME:
            return args, "Empty function name provided. Provide a valid function name."
        if name not in {f.name for f in self._suite.tools}:
            return args, f"Invalid tool {name} provided."
        return {k: _as_runner_arg(v) for k, v in args.items()}, None

    def wire_message(
        self, message: Message, *, call_args: Sequence[dict[str, Any] | None] = (), error: bool = False
    ) -> dict[str, Any]:
        return dict(_message_to_openai(_chat_message(message, call_args, error), self._model))


def _as_runner_arg(value: Any) -> Any:
    # ToolsExecutor: "a string that reads as a Python list" becomes that list.
    return literal_eval(value) if isinstance(value, str) and is_string_list(value) else value


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
            executed = json.loads(arguments)
        except ValueError:
            executed = {}
    return FunctionCall(function=name, args=executed, id=call_id)
