"""Tool calls a model wrote into the answer's text, where the server did not parse them into ``tool_calls``.

A call is a JSON object ``{"name": <tool>, "arguments": {...}}`` (``"parameters"`` instead of
``"arguments"``, the arguments as a JSON-encoded string, or the OpenAI ``{"function": {...}}`` wrapping are
all read), or a JSON list of such objects. Where it sits does not matter: alone, several on separate lines,
inside a ```json fence, inside Hermes / Qwen ``<tool_call>...</tool_call>`` tags, after Mistral's
``[TOOL_CALLS]`` or Llama 3's ``<|python_tag|>``, with prose before or after it.

What keeps prose from becoming a call: only text that decodes as JSON counts, and only an object whose
``name`` is one of the request's tools (a list counts only when every item is such a call). Braces in
prose, JSON that is data, and calls of tools the request did not offer stay text.

``find_text_calls`` gives the calls in the order written. The agent loop records any of them as a textual
action; the backend turns them into calls only when ``wire.parse_text_tool_calls`` is on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
# Where a call can start: an object's first key, or a list whose first item is an object.
_START = re.compile(r'\{\s*"|\[\s*\{')
# Wrappers that belong to the call they surround, so that they leave the text with it.
_OPENER = re.compile(r"(<tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>|```[A-Za-z]*)\s*$")
_CLOSER = re.compile(r"\s*(</tool_call>|```)")
_SHAPES = {"<tool_call>": "hermes", "[TOOL_CALLS]": "mistral", "<|python_tag|>": "llama3_json"}


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: str  # JSON text, as a native call carries it


@dataclass(frozen=True)
class TextCalls:
    shape: str  # the first call's wrapping: "hermes" | "mistral" | "fenced" | "llama3_json" | "json"
    calls: tuple[TextCall, ...]
    rest: str  # the text around the calls, wrappers removed


def _as_call(obj: Any, known: set[str]) -> TextCall | None:
    if not isinstance(obj, dict):
        return None
    fn = obj["function"] if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    if not isinstance(name, str) or name not in known:
        return None
    args = fn.get("arguments", fn.get("parameters"))
    if args is None:
        args = {}
    # A string is already the arguments' JSON text (kept as sent, like a native call's); anything else
    # is serialised, and arguments that are not an object fail the call downstream as malformed ones do.
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return TextCall(name, text)


def _calls_of(value: Any, known: set[str]) -> list[TextCall] | None:
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, known) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _shape(opener: str | None) -> str:
    if opener is None:
        return "json"
    return "fenced" if opener.startswith("```") else _SHAPES[opener]


def find_text_calls(text: str | None, known: set[str]) -> TextCalls | None:
    """The tool calls written as text in ``text``, or None when there are none of a known tool."""
    # Cheap refusal first: without a known tool's name in quotes there can be no call.
    if not text or not any(f'"{name}"' in text for name in known):
        return None
    calls: list[TextCall] = []
    kept: list[str] = []
    shape: str | None = None
    pos = 0  # text before pos is consumed (kept as rest or taken as a call)
    scan = 0
    while (m := _START.search(text, scan)) is not None:
        start = m.start()
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to be a call
            scan = start + 1
            continue
        found = _calls_of(value, known)
        scan = end  # a JSON value that is not a call holds none either: its inside is data
        if found is None:
            continue
        before = text[pos:start]
        # A fence wraps the call only from inside it: an odd number of fences before the call.
        fenced = text.count("```", 0, start) % 2 == 1
        opener = _OPENER.search(before)
        if opener is not None and (opener.group(1).startswith("```") and not fenced):
            opener = None
        if opener is not None:
            before = before[: opener.start()]
        closer = _CLOSER.match(text, end)
        if closer is not None and closer.group(1) == "```" and not fenced:
            closer = None
        kept.append(before)
        calls += found
        shape = shape or _shape(opener.group(1) if opener else None)
        pos = scan = closer.end() if closer is not None else end
    if not calls:
        return None
    kept.append(text[pos:])
    rest = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", "".join(kept)).strip()
    return TextCalls(shape or "json", tuple(calls), rest)
