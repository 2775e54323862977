"""Any OpenAI-compatible chat endpoint, through the ``openai`` client."""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import openai

from evoaudit.config import EndpointConfig
from evoaudit.models.base import ChatRequest, ChatResponse, InfraFailure
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


def from_wire(choice_message: Any) -> Message:
    calls = [
        ToolCall(id=tc.id or f"call_{i}", name=tc.function.name, arguments=tc.function.arguments or "")
        for i, tc in enumerate(choice_message.tool_calls or [])
    ]
    return Message(role="assistant", content=choice_message.content, tool_calls=calls)


class OpenAIBackend:
    def __init__(self, endpoint: EndpointConfig) -> None:
        self.endpoint = endpoint
        key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
        self.client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=key or "not-needed",
            timeout=endpoint.timeout_s,
            max_retries=0,  # retries are ours, so that every attempt is classified
        )

    def fingerprint(self) -> dict[str, Any]:
        e = self.endpoint
        return {
            "backend": "openai",
            "model": e.model,
            "base_url": e.base_url,
            "sampling": {
                "temperature": e.temperature,
                "max_tokens": e.max_tokens,
                "extra_body": e.extra_body,
            },
        }

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        e = self.endpoint
        body: dict[str, Any] = {
            "model": e.model,
            "messages": [to_wire(m) for m in request.messages],
            "temperature": e.temperature,  # sent even when 0
            "max_tokens": e.max_tokens,
        }
        if request.tools:
            body["tools"] = list(request.tools)
        if e.send_seed and request.seed is not None:
            body["seed"] = request.seed
        return body

    async def complete(self, request: ChatRequest) -> ChatResponse:
        body = self.request_body(request)
        attempt = 0
        while True:
            try:
                resp = await self.client.chat.completions.create(
                    **body, extra_body=self.endpoint.extra_body or None
                )
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
            ) as exc:
                attempt += 1
                if attempt > self.endpoint.max_retries:
                    raise InfraFailure("retries_exhausted", f"{type(exc).__name__}: {exc}") from exc
                await asyncio.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random()))
                continue
            choice = resp.choices[0]
            usage = resp.usage
            return ChatResponse(
                message=from_wire(choice.message),
                finish_reason=choice.finish_reason,
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            )
