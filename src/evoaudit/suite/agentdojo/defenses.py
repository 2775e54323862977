"""AgentDojo's own defences, read out of the pipeline AgentDojo builds for them.

Nothing of AgentDojo's defence text or formatting is written here: ``AgentPipeline.from_config`` builds
the pipeline AgentDojo would run for a defence (with a stand-in where its LLM goes, never queried), and
the three parts evoaudit's loop applies are taken from its elements:

- the system message (``SystemMessage``: spotlighting appends its sentence about ``<<`` and ``>>``);
- the tool-output formatter of its ``ToolsExecutor`` (spotlighting wraps every result in ``<<``/``>>``);
- what the tools loop inserts after each round of tool results (``InitQuery``: repeat_user_prompt adds
  the user's prompt again as a user message, produced by calling AgentDojo's element).

``tool_filter``'s pipeline holds an OpenAI tool filter of AgentDojo's own (it would call OpenAI's client
itself); evoaudit asks its ``TOOL_FILTER_PROMPT`` through its own model client instead
(``suite.defenses``). The transformers prompt-injection detector has no part evoaudit can apply; the
configuration refuses it before any job (``evoaudit.config``). evoaudit's ``llm_monitor`` decides with the
executor's model instead, and AgentDojo's ``PromptInjectionDetector`` element applies the decision
(``detector_output``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from agentdojo.agent_pipeline.agent_pipeline import (
    DEFENSES,
    TOOL_FILTER_PROMPT,
    AgentPipeline,
    PipelineConfig,
)
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
from agentdojo.agent_pipeline.pi_detector import PromptInjectionDetector
from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime
from agentdojo.types import ChatAssistantMessage, ChatToolResultMessage, text_content_block_from_string

# Which of AgentDojo's defences evoaudit runs: those whose pipeline holds only parts evoaudit applies.
RUNNABLE = ("spotlighting_with_delimiting", "repeat_user_prompt")


class _StandIn(BasePipelineElement):
    """Where AgentDojo's pipeline puts its LLM: evoaudit's own loop calls the model, so this never runs."""

    name = "evoaudit-loop"

    def query(self, query, runtime, env=None, messages=(), extra_args=None):
        raise RuntimeError("the AgentDojo pipeline is read for its defence parts, never run")


def _pipeline(defense: str, system_message: str) -> AgentPipeline:
    if defense not in DEFENSES:
        raise ValueError(f"{defense!r} is not one of AgentDojo's defences {DEFENSES}")
    config = PipelineConfig(
        llm=_StandIn(),
        model_id=None,
        defense=defense,
        system_message_name=None,
        system_message=system_message,
    )
    return AgentPipeline.from_config(config)


def _loop(pipeline: AgentPipeline) -> ToolsExecutionLoop:
    return next(e for e in pipeline.elements if isinstance(e, ToolsExecutionLoop))


def _check(defense: str) -> None:
    if defense not in RUNNABLE:
        raise ValueError(f"AgentDojo defence {defense!r} is not one evoaudit runs (it runs {RUNNABLE})")


@lru_cache(maxsize=64)
def system_message(defense: str, system: str) -> str:
    """The system message AgentDojo's pipeline for ``defense`` sends, given ``system`` as its own."""
    _check(defense)
    first = next(e for e in _pipeline(defense, system).elements if isinstance(e, SystemMessage))
    return first.system_message


def tool_output(defense: str, text: str) -> str:
    """``text`` (a tool result as evoaudit's runtime formatted it) through the defence's ToolsExecutor
    formatter: AgentDojo's formatter leaves a string as it is, and a defence's wrapping is added."""
    _check(defense)
    executor = next(e for e in _loop(_cached(defense)).elements if isinstance(e, ToolsExecutor))
    return executor.output_formatter(text)


def after_tools(defense: str, prompt: str) -> list[str]:
    """The user messages the defence's tools loop adds after a round of tool results, in order."""
    _check(defense)
    out: list[str] = []
    for element in _loop(_cached(defense)).elements:
        if isinstance(element, InitQuery):
            _, _, _, messages, _ = element.query(prompt, FunctionsRuntime([]), EmptyEnv(), [], {})
            out.append(_text(messages[-1]["content"]))
    return out


def _text(content: str | Sequence[dict] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(block.get("content") or "" for block in content if block.get("type") == "text")


@lru_cache(maxsize=8)
def _cached(defense: str) -> AgentPipeline:
    # The formatter and the loop's elements do not depend on the system message.
    return _pipeline(defense, "")


def tool_filter_prompt() -> str:
    """The question AgentDojo's tool_filter asks the model before the task (its ``TOOL_FILTER_PROMPT``)."""
    return TOOL_FILTER_PROMPT


@lru_cache(maxsize=256)
def invalid_tool(name: str) -> str:
    """What AgentDojo's ``ToolsExecutor`` answers a call to a tool its runtime does not offer (after its
    tool filter dropped it): obtained by running the executor on such a call over an empty runtime. Its
    OpenAI formatting sends the error as the tool message's content."""
    call = FunctionCall(function=name, args={}, id="evoaudit-filtered")
    asked = [ChatAssistantMessage(role="assistant", content=None, tool_calls=[call])]
    _, _, _, messages, _ = ToolsExecutor().query("", FunctionsRuntime([]), EmptyEnv(), asked, {})
    return messages[-1]["error"]


class _Decided(PromptInjectionDetector):
    """AgentDojo's detector element with the decision already made (by evoaudit's monitor request, which is
    asynchronous and goes through evoaudit's own client): the element does the rest, as in AgentDojo."""

    def __init__(self, flagged: bool) -> None:
        super().__init__(mode="message", raise_on_injection=False)
        self._flagged = flagged

    def detect(self, tool_output: str) -> bool:
        return self._flagged


@lru_cache(maxsize=1024)
def detector_output(text: str, flagged: bool) -> str:
    """What AgentDojo's ``PromptInjectionDetector`` leaves of the tool message ``text`` when its detector
    said ``flagged``: the text itself, or the element's own notice in its place."""
    call = FunctionCall(function="tool", args={}, id="evoaudit-monitor")
    message = ChatToolResultMessage(
        role="tool",
        content=[text_content_block_from_string(text)],
        tool_call_id="evoaudit-monitor",
        tool_call=call,
        error=None,
    )
    _, _, _, messages, _ = _Decided(flagged).query("", FunctionsRuntime([]), EmptyEnv(), [message], {})
    return _text(messages[-1]["content"])
