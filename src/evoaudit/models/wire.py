"""Our messages in and out of the OpenAI chat-completions JSON shape (both client and server side)."""

from __future__ import annotations

import json
from typing import Any

from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.models.text_calls import find_text_calls
from evoaudit.records import Message, ToolCall


def to_wire(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.tool_calls:
        out["tool_calls"] = [
            {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
            for tc in msg.tool_calls
        ]
    if msg.tool_call_id is not None:
        out["tool_call_id"] = msg.tool_call_id
    if msg.role == "tool" and msg.name:
        out["name"] = msg.name
    return out


def request_message(msg: Message, assistant_content: str = "empty") -> dict[str, Any]:
    """``msg`` as a request carries it. An assistant turn without text (it only called tools) gets
    ``content: ""`` by default: llama-cpp-python rejects ``null`` and a missing field with a 500, while
    every server tried accepts the empty string; ``null`` and ``omit`` are there for servers that differ."""
    out = to_wire(msg)
    if msg.role == "assistant" and not msg.content:
        if assistant_content == "empty":
            out["content"] = ""
        elif assistant_content == "null":
            out["content"] = None
        else:
            out.pop("content", None)
    return out


def _arguments(raw: Any) -> str:
    # Most servers send the arguments as a JSON string; some (Ollama, a few proxies) send the object.
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return json.dumps(raw, ensure_ascii=False)


def _reasoning(data: dict[str, Any]) -> str | None:
    # vLLM/SGLang/DeepSeek name it reasoning_content; OpenRouter and newer vLLM name it reasoning.
    for key in ("reasoning_content", "reasoning"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def message_from_wire(data: dict[str, Any]) -> Message:
    content = data.get("content")
    if isinstance(content, list):  # content parts: keep the text ones, in order
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = [
        ToolCall(
            id=tc.get("id") or f"call_{i}",
            name=(tc.get("function") or {}).get("name") or "",
            arguments=_arguments((tc.get("function") or {}).get("arguments")),
        )
        for i, tc in enumerate(data.get("tool_calls") or [])
    ]
    return Message(
        role=data["role"],
        content=content,
        tool_calls=calls,
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
        reasoning=_reasoning(data) if data["role"] == "assistant" else None,
    )


def _stable_ids(data: dict[str, Any], turn: int, taken: set[str]) -> dict[str, Any]:
    """Tool calls with a missing id, or one already used in this message or the conversation, get
    ``call_<turn>_<index>``: the same answer always gets the same ids, and every id is unique."""
    raw = data.get("tool_calls") or []
    seen = set(taken)
    fixed = []
    for i, tc in enumerate(raw):
        tc = dict(tc) if isinstance(tc, dict) else {}
        if not tc.get("id") or tc["id"] in seen:
            tc["id"] = f"call_{turn}_{i}"
        seen.add(tc["id"])
        fixed.append(tc)
    return {**data, "tool_calls": fixed} if raw else data


def parse_completion(
    text: str,
    request: ChatRequest | None = None,
    *,
    parse_text_calls: bool = False,
) -> ChatResponse | str:
    """The first choice of a chat-completions body, or why it is not one (a retryable server fault).

    Accepted as servers send them: arguments as a string or an object, missing or repeated call ids,
    calls with ``finish_reason`` ``stop``, parallel calls, reasoning fields. Calls left as text are
    parsed only when ``parse_text_calls``; the message then says so (``tool_calls_from_text``).
    """
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        raw = dict(choice["message"])
        taken: set[str] = set()
        turn = 0
        if request is not None:
            turn = len(request.messages)
            taken = {tc.id for m in request.messages for tc in m.tool_calls}
        message = message_from_wire({**_stable_ids(raw, turn, taken), "role": "assistant"})
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return f"a malformed completion body ({type(exc).__name__}: {exc}): {text[:200]!r}"
    usage = data.get("usage") or {}
    message = message.model_copy(update={"tool_call_id": None, "name": None})
    if parse_text_calls and not message.tool_calls and request is not None:
        known = {t.get("function", {}).get("name") for t in request.tools}
        found = find_text_calls(message.content, {n for n in known if n})
        if found is not None:
            calls = [
                ToolCall(id=f"call_{turn}_{i}", name=c.name, arguments=c.arguments)
                for i, c in enumerate(found.calls)
            ]
            message = message.model_copy(
                update={"tool_calls": calls, "content": found.rest or None, "tool_calls_from_text": True}
            )
    return ChatResponse(
        message=message,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens") or 0,
        completion_tokens=usage.get("completion_tokens") or 0,
    )


def request_from_wire(body: dict[str, Any]) -> ChatRequest:
    """A chat-completions body as the request a backend sees (sampling fields are the server's business)."""
    return ChatRequest(
        messages=tuple(message_from_wire(m) for m in body.get("messages") or []),
        tools=tuple(body.get("tools") or ()),
        seed=body.get("seed"),
    )


def completion_json(response: ChatResponse, model: str, completion_id: str, created: int = 0) -> dict:
    msg = to_wire(response.message)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": response.finish_reason or "stop"}],
        "usage": {
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "total_tokens": response.prompt_tokens + response.completion_tokens,
        },
    }
