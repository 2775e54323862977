"""The simulated APEX attacker as a chat backend, and the attacker for a configured endpoint.

The answers themselves are ``suite.apex.attacker_sim.answer`` (deterministic, offline); ``SimAttacker``
wraps them as a ``ChatBackend`` so they can also be served over HTTP. ``make_attacker(endpoint)`` builds the
``suite.apex.attacker.Attacker`` for ``suite.apex.attacker``: the simulator for ``backend: sim``, the
project's OpenAI-compatible backend (with its response cache) for ``backend: openai``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from evoaudit.models.base import ChatRequest, ChatResponse, ResponseSchema
from evoaudit.models.cache import request_key
from evoaudit.records import Message
from evoaudit.suite.apex import attacker_sim
from evoaudit.suite.apex.attacker import Attacker, response_schema
from evoaudit.suite.apex.attacker_sim import extract_keywords

__all__ = ["SimAttacker", "extract_keywords", "make_attacker"]


class SimAttacker:
    """A ``ChatBackend`` that answers the attacker's steps; any other request is an error."""

    def __init__(self, model: str = "evoaudit-sim-attacker") -> None:
        self.model = model

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "sim", "model": self.model, "role": "apex-attacker"}

    def answer(self, messages: tuple[Message, ...]) -> str:
        return attacker_sim.answer(messages)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.respond(request)

    def respond(self, request: ChatRequest) -> ChatResponse:
        text = attacker_sim.answer(request.messages)
        return ChatResponse(message=Message(role="assistant", content=text), finish_reason="stop")


def make_attacker(endpoint: Any) -> Attacker:
    """The attacker for ``suite.apex.attacker`` (a ``config.EndpointConfig``)."""
    if endpoint.backend == "sim":
        return Attacker(attacker_sim.answer, endpoint.model)
    if endpoint.backend == "openai":
        from evoaudit.models.openai_backend import OpenAIBackend

        backend = OpenAIBackend(endpoint, role="suite.apex.attacker")

        def request(msgs: tuple[Message, ...]) -> ChatRequest:
            spec = response_schema(msgs)  # the step's answer schema, sent where the server honours it
            schema = ResponseSchema.of(spec) if spec is not None else None
            return ChatRequest(messages=msgs, seed=0, response_schema=schema)

        def ask(msgs: tuple[Message, ...]) -> str:
            reply = asyncio.run(backend.complete(request(msgs)))
            return reply.message.content or ""

        def key(msgs: tuple[Message, ...]) -> str:
            # The response cache's own key for this request (as OpenAIBackend.complete computes it).
            body = backend.request_body(request(msgs))
            return request_key(backend.url, body | {"extra_body": endpoint.extra_body})

        return Attacker(ask, endpoint.model, key)
    raise ValueError(f"suite.apex.attacker.backend: unknown backend {endpoint.backend!r}; use sim or openai")
