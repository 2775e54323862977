"""A scripted model for APEX-Harm episode tests: it makes the given tool calls in one turn, then answers."""

from __future__ import annotations

import json

from evoaudit.models.base import ChatResponse
from evoaudit.records import Message, ToolCall


class Scripted:
    """A model that makes the given calls in one turn, then answers."""

    def __init__(self, calls: list[tuple[str, dict]]):
        self.calls = calls

    def fingerprint(self) -> dict:
        return {"backend": "scripted", "model": "scripted"}

    async def complete(self, request) -> ChatResponse:
        if any(m.role == "tool" for m in request.messages):
            return ChatResponse(message=Message(role="assistant", content="done"))
        tcs = [ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(self.calls)]
        return ChatResponse(message=Message(role="assistant", tool_calls=tcs))
