"""Tool calls a server left in the answer's text instead of parsing them into ``tool_calls``.

Three shapes are common when a server's chat template or parser does not match the model:

- Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (one block per call);
- Llama 3: a bare JSON object ``{"name": ..., "parameters": {...}}`` (or a list of them) as the answer;
- Mistral: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}]``.

``find_text_calls`` says which shape it saw and what calls it holds, for known tool names only, so that
prose mentioning a JSON object is not taken for a call. The agent loop records any of them as a textual
action; the backend turns them into calls only when ``wire.parse_text_tool_calls`` is on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(.*)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: str  # JSON text, as a native call carries it


@dataclass(frozen=True)
class TextCalls:
    shape: str  # "hermes" | "llama3_json" | "mistral"
    calls: tuple[TextCall, ...]
    rest: str  # the text around the calls


def _as_call(obj: Any, known: set[str]) -> TextCall | None:
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    if not isinstance(name, str) or name not in known:
        return None
    args = fn.get("arguments", fn.get("parameters", {}))
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return TextCall(name, text)


def _calls_in(payload: str, known: set[str]) -> list[TextCall] | None:
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = [_as_call(item, known) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def find_text_calls(text: str | None, known: set[str]) -> TextCalls | None:
    """The tool calls written as text in ``text``, or None when there are none of a known tool."""
    if not text:
        return None
    if "<tool_call>" in text:
        calls: list[TextCall] = []
        for block in _HERMES.findall(text):
            found = _calls_in(block, known)
            if found:
                calls += found
        if calls:
            return TextCalls("hermes", tuple(calls), _HERMES.sub("", text).strip())
    if (m := _MISTRAL.search(text)) is not None:
        found = _calls_in(m.group(1).strip(), known)
        if found:
            return TextCalls("mistral", tuple(found), text[: m.start()].strip())
    stripped = text.strip().removeprefix("<|python_tag|>").strip()
    if (fence := _FENCE.match(stripped)) is not None:
        stripped = fence.group(1)
    if stripped.startswith(("{", "[")):
        found = _calls_in(stripped, known)
        if found:
            return TextCalls("llama3_json", tuple(found), "")
    return None
