"""A chat backend as a plain function for a role that asks for a JSON answer (a judge, an attacker).

``backend_ask`` sends a conversation through any ``ChatBackend`` (the openai backend with its response
cache, or the simulator) with a response schema, so each answer is one cached, replayable call.
``endpoint_transport`` does the same for a configured endpoint and also gives the response cache's key of
each request, so a recorded step can be looked up and replayed. Which schema a role's request carries is
the suite's to say (``suite.roles``); nothing here is specific to a suite.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from evoaudit.models.base import ChatBackend, ChatRequest, ResponseSchema
from evoaudit.models.cache import request_key
from evoaudit.records import Message


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to completion, also when called from inside a running event loop (in a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def backend_ask(backend: ChatBackend, schema: ResponseSchema | None) -> Callable[[list[Message], int], str]:
    """``ask(messages, seed)``: the text of ``backend``'s answer to ``messages``, sent with ``schema``."""

    def ask(messages: list[Message], seed: int) -> str:
        request = ChatRequest(messages=tuple(messages), seed=seed, response_schema=schema)
        response = run_sync(backend.complete(request))
        return response.message.content or ""

    return ask


def endpoint_transport(endpoint: Any, role: str) -> tuple[Callable[..., str], Callable[..., str]]:
    """(send, key) for a configured ``backend: openai`` endpoint (``config.EndpointConfig``) at ``role``:
    ``send(messages, spec)`` the answer's text, ``key(messages, spec)`` the response cache's own key of that
    request (as ``OpenAIBackend.complete`` computes it). ``spec``: the answer's schema in the plain
    {"name", "schema"} form, or None. Requests go with seed 0."""
    from evoaudit.models.openai_backend import OpenAIBackend  # only a model endpoint needs the HTTP stack

    backend = OpenAIBackend(endpoint, role=role)

    def request(msgs: tuple[Message, ...], spec: dict[str, Any] | None) -> ChatRequest:
        schema = ResponseSchema.of(spec) if spec is not None else None  # sent where the server honours it
        return ChatRequest(messages=msgs, seed=0, response_schema=schema)

    def send(msgs: tuple[Message, ...], spec: dict[str, Any] | None) -> str:
        reply = asyncio.run(backend.complete(request(msgs, spec)))
        return reply.message.content or ""

    def key(msgs: tuple[Message, ...], spec: dict[str, Any] | None) -> str:
        body = backend.request_body(request(msgs, spec))
        return request_key(backend.url, body | {"extra_body": endpoint.extra_body})

    return send, key
