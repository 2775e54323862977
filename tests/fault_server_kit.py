"""Loopback endpoints and small fixtures for exercising the backends over real HTTP.

``FaultHandler`` is an OpenAI-compatible endpoint that injects, on a schedule, the faults a real endpoint
shows: 429 with Retry-After, 500, a stall past the client's timeout, malformed tool-call JSON, an unknown
tool, a provider guardrail rejection (as an HTTP error or as ``finish_reason: content_filter``) and a
context overflow. Between faults it answers with a SimBackend (or a fixed final message). It records
every chat request body, so tests can assert what reached the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evoaudit.models.base import ChatResponse
from evoaudit.models.http import Reply, Request
from evoaudit.models.sim.tools import SimBackend
from evoaudit.models.wire import completion_json, request_from_wire
from evoaudit.records import Message, ToolCall

__all__ = ["FAULTS", "FaultHandler"]

FAULTS = (
    "ok",
    "rate_limit",
    "server_error",
    "stall",
    "malformed_args",
    "unknown_tool",
    "guardrail",
    "content_filter",
    "context_overflow",
)
# Faults of the connection rather than of the answer: a normal answer after which the server closes the
# kept-alive connection unannounced (as a server expiring idle connections does), a head of headers over
# 64 KiB, a 204 with no body, a 100 Continue before the answer, a body cut off mid-way, and an answer
# dripped a few bytes at a time so that no single read times out (slow loris).
TRANSPORT_FAULTS = (
    "close_after",
    "oversized_headers",
    "no_content",
    "informational",
    "mid_body_disconnect",
    "slow_loris",
)


@dataclass
class Seen:
    fault: str
    body: dict[str, Any]


@dataclass
class FaultHandler:
    """``schedule`` is consumed one entry per chat request in arrival order, or is a function of
    (request number, body); past its end every request is answered normally."""

    schedule: Sequence[str] | Callable[[int, dict[str, Any]], str] = ()
    responder: SimBackend | None = None
    retry_after_s: float = 0.05
    stall_s: float = 2.0
    drip_s: float = 0.05  # slow_loris: pause between chunks of its answer
    model: str = "fault-model"
    latency_s: float = 0.0  # added to every normal answer
    seen: list[Seen] = field(default_factory=list)
    other_requests: int = 0
    inflight: int = 0
    max_inflight: int = 0

    def _fault(self, n: int, body: dict[str, Any]) -> str:
        if callable(self.schedule):
            fault = self.schedule(n, body)
        else:
            fault = self.schedule[n] if n < len(self.schedule) else "ok"
        if fault not in FAULTS + TRANSPORT_FAULTS:
            raise ValueError(f"fault schedule: unknown fault {fault!r}; known: {FAULTS + TRANSPORT_FAULTS}")
        return fault

    async def __call__(self, req: Request) -> Reply:
        if req.method == "GET" and req.path.rstrip("/") == "/v1/models":
            self.other_requests += 1
            return Reply.json({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if req.path.rstrip("/") != "/v1/chat/completions":
            self.other_requests += 1
            return Reply.error(404, f"no route {req.path}", "not_found")
        body = req.json()
        fault = self._fault(len(self.seen), body)
        self.seen.append(Seen(fault, body))
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            return await self._reply(fault, body)
        finally:
            self.inflight -= 1

    async def _reply(self, fault: str, body: dict[str, Any]) -> Reply:
        if fault in TRANSPORT_FAULTS:
            return self._transport_fault(fault, body)
        if fault == "rate_limit":
            return Reply.error(
                429,
                "rate limit reached, slow down",
                "rate_limit_exceeded",
                **{"retry-after": f"{self.retry_after_s:g}"},
            )
        if fault == "server_error":
            # Transient: the body names the request, as real servers' do, so it is retried, never taken
            # for a rejection of the request (which repeats byte for byte).
            return Reply.error(500, f"internal error while generating (request {len(self.seen)})", None)
        if fault == "guardrail":
            return Reply.error(
                400, "the prompt was blocked by the provider's content policy", "content_filter"
            )
        if fault == "context_overflow":
            return Reply.error(
                400, "the prompt exceeds the maximum context length of this model", "context_length_exceeded"
            )
        if fault == "stall":
            await asyncio.sleep(self.stall_s)
        elif self.latency_s:
            await asyncio.sleep(self.latency_s)
        message, finish = self._answer(fault, body)
        response = ChatResponse(message=message, finish_reason=finish, prompt_tokens=1, completion_tokens=1)
        return Reply.json(completion_json(response, self.model, f"chatcmpl-{len(self.seen)}"))

    def _transport_fault(self, fault: str, body: dict[str, Any]) -> Reply:
        if fault == "no_content":
            return Reply(204, b"", {"content-length": "0"})
        message, finish = self._answer("ok", body)
        response = ChatResponse(message=message, finish_reason=finish, prompt_tokens=1, completion_tokens=1)
        good = Reply.json(completion_json(response, self.model, f"chatcmpl-{len(self.seen)}"))
        if fault == "close_after":
            return Reply(good.status, good.body, good.headers, close=True)
        if fault == "oversized_headers":
            return Reply(good.status, good.body, good.headers | {"x-padding": "p" * (96 * 1024)})
        if fault == "informational":
            return Reply(raw=b"HTTP/1.1 100 Continue\r\n\r\n" + good.encode())
        if fault == "mid_body_disconnect":
            data = good.encode()
            return Reply(raw=data[: len(data) - len(good.body) // 2], close=True)
        # slow_loris: the whole answer takes far longer than the client's timeout, no read ever waits long
        return Reply(good.status, good.body, good.headers, drip_s=self.drip_s, drip_chunk=8)

    def _answer(self, fault: str, body: dict[str, Any]) -> tuple[Message, str]:
        if fault == "malformed_args":
            call = ToolCall(id="call_bad", name="send_money", arguments='{"recipient": "US12", "amount": ')
            return Message(role="assistant", tool_calls=[call]), "tool_calls"
        if fault == "unknown_tool":
            call = ToolCall(id="call_unknown", name="transfer_everything", arguments="{}")
            return Message(role="assistant", tool_calls=[call]), "tool_calls"
        if fault == "content_filter":
            return Message(role="assistant", content=""), "content_filter"
        if self.responder is not None:
            r = self.responder.respond(request_from_wire(body))
            return r.message, r.finish_reason or "stop"
        return Message(role="assistant", content="Done."), "stop"

    def count(self, fault: str) -> int:
        return sum(s.fault == fault for s in self.seen)
