"""Our messages in and out of the OpenAI chat-completions JSON shape (both client and server side)."""

from __future__ import annotations

from typing import Any

from evoaudit.models.base import ChatRequest, ChatResponse
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


def message_from_wire(data: dict[str, Any]) -> Message:
    content = data.get("content")
    if isinstance(content, list):  # content parts: keep the text ones, in order
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = [
        ToolCall(
            id=tc.get("id") or f"call_{i}",
            name=(tc.get("function") or {}).get("name") or "",
            arguments=(tc.get("function") or {}).get("arguments") or "",
        )
        for i, tc in enumerate(data.get("tool_calls") or [])
    ]
    return Message(
        role=data["role"],
        content=content,
        tool_calls=calls,
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
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
