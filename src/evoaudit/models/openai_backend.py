"""Any OpenAI-compatible chat endpoint, through the ``openai`` client.

What the backend guarantees, in the order a request meets it:

1. the persistent response cache (``models.cache``) answers a request it has seen, at no cost;
2. one semaphore per endpoint and event loop bounds the requests in flight (``concurrency``), shared by
   every rollout of the job;
3. sampling is explicit: temperature is always sent (0 included), max tokens, the episode seed when
   ``send_seed``, and ``extra_body`` verbatim;
4. 429, 5xx, timeouts and connection errors are retried with exponential backoff and jitter, honouring a
   server's ``Retry-After``; the client's own retries are off so that every attempt is classified here;
5. what cannot be recovered becomes an InfraFailure of one class (retries exhausted, guardrail
   rejection, context overflow), recorded by the rollout; a rejected request that is none of these
   (bad key, unknown model) stops the job with an EndpointError, since every rollout would fail alike.

The endpoint fingerprint (served model ids from ``/models``, server version where offered, base URL,
sampling) is fetched once, before the first live request. It never contains the API key.

Requests go through the client's low-level ``post`` with the body exactly as built here, and over the
lean transport of ``models.transport`` for plain-http endpoints: the typed parameter transform and the
default transport each cost more per request than a local endpoint at high concurrency leaves.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import openai

from evoaudit.config import EndpointConfig
from evoaudit.errors import AuditError
from evoaudit.models.base import ChatRequest, ChatResponse, Fingerprint, InfraFailure
from evoaudit.models.cache import ResponseCache, request_key
from evoaudit.models.transport import StreamTransport
from evoaudit.models.wire import message_from_wire, to_wire

log = logging.getLogger(__name__)

# Markers of a provider's guardrail or content filter, and of a prompt longer than the context window,
# in an error's code or message (OpenAI, Azure, vLLM, SGLang, llama.cpp and Ollama phrase them so).
_GUARDRAIL = re.compile(
    r"content[_ ]?(filter|policy|management)|guardrail|safety (system|policy)|flagged|moderation|"
    r"responsible ?ai",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
    r"exceeds? the (model'?s? )?(max|context)|input (is )?too long",
    re.IGNORECASE,
)
_jitter = random.Random()  # timing only: never feeds any recorded value


class EndpointError(AuditError):
    """The endpoint refused a request in a way no retry fixes (authentication, unknown model, bad body)."""


def classify_status(status: int, code: str | None, message: str) -> str:
    """'retry', an InfraFailure kind, or 'fatal' for an HTTP error response."""
    text = f"{code or ''} {message}"
    if status in (408, 409, 425, 429) or status >= 500:
        # A provider may also send its content filter as a 5xx; look at the text first.
        if _GUARDRAIL.search(text) and status != 429:
            return "guardrail_rejection"
        return "retry"
    if _GUARDRAIL.search(text):
        return "guardrail_rejection"
    if status == 413 or _CONTEXT.search(text):
        return "context_overflow"
    return "fatal"


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, ``retry-after`` as seconds or a date)."""
    if headers is None:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to our own backoff
    return max(0.0, when.timestamp() - time.time())


def _parse_completion(text: str) -> ChatResponse | str:
    """The first choice of a chat-completions body, or why it is not one (a retryable server fault)."""
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        message = message_from_wire({**choice["message"], "role": "assistant"})
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return f"a malformed completion body ({type(exc).__name__}: {exc}): {text[:200]!r}"
    usage = data.get("usage") or {}
    return ChatResponse(
        message=message.model_copy(update={"tool_call_id": None, "name": None}),
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens") or 0,
        completion_tokens=usage.get("completion_tokens") or 0,
    )


async def _close_at_shutdown(client: openai.AsyncOpenAI, backend: OpenAIBackend) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.close()
        log.info("%s: %s", backend.endpoint.base_url, backend.cache_stats())


@dataclass
class _LoopState:
    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    gate: asyncio.Semaphore
    fingerprint_lock: asyncio.Lock


class OpenAIBackend:
    def __init__(self, endpoint: EndpointConfig, *, use_cache: bool | None = None) -> None:
        if not endpoint.base_url:
            raise EndpointError("executor/optimizer base_url: required for the openai backend")
        self.endpoint = endpoint
        self._api_key = "not-needed"
        if endpoint.api_key_env:
            key = os.environ.get(endpoint.api_key_env)
            if not key:
                raise EndpointError(
                    f"api_key_env: environment variable {endpoint.api_key_env} is not set; export it or set "
                    "api_key_env to null for an endpoint without authentication"
                )
            self._api_key = key
        cache_on = endpoint.cache if use_cache is None else use_cache
        self.cache = ResponseCache(endpoint.cache_path) if cache_on else None
        self._state: _LoopState | None = None
        self._closers: list[Any] = []
        self._live: dict[str, Any] | None = None
        self._from_cache: dict[str, Any] | None = None
        self.attempts = 0  # chat requests actually sent, retries included
        self.retries = 0

    # -- provenance ---------------------------------------------------------------------------------

    def sampling(self) -> dict[str, Any]:
        e = self.endpoint
        return {
            "temperature": e.temperature,
            "max_tokens": e.max_tokens,
            "seed": "per-episode" if e.send_seed else None,
            "extra_body": e.extra_body,
            "timeout_s": e.timeout_s,
        }

    def fingerprint(self) -> dict[str, Any]:
        if self._live is not None:
            return self._live
        if self._from_cache is not None:  # every answer so far came from the cache
            return {**self._from_cache, "source": "cache"}
        return Fingerprint(
            backend="openai",
            model=self.endpoint.model,
            base_url=self.endpoint.base_url,
            sampling=self.sampling(),
        ).model_dump() | {"source": "not contacted"}

    async def _ensure_fingerprint(self, st: _LoopState) -> None:
        if self._live is not None:
            return
        async with st.fingerprint_lock:
            if self._live is not None:
                return
            served: list[str] = []
            notes: dict[str, str] = {}
            try:
                page = await st.client.models.list()
                served = sorted(m.id for m in page.data)
            except openai.OpenAIError as exc:
                notes["models_error"] = f"{type(exc).__name__}"
            version = await asyncio.to_thread(self._server_version)
            fp = Fingerprint(
                backend="openai",
                model=self.endpoint.model,
                base_url=self.endpoint.base_url,
                served_models=served,
                server_version=version,
                sampling=self.sampling(),
            ).model_dump()
            self._live = fp | notes | {"source": "live"}
            if served and self.endpoint.model not in served:
                log.warning("model %r is not among the served models %s", self.endpoint.model, served)

    def _server_version(self) -> str | None:
        # vLLM and SGLang answer /version at the server root; Ollama answers /api/version.
        root = str(self.endpoint.base_url).rstrip("/").removesuffix("/v1")
        for path in ("/version", "/api/version"):
            try:
                with urllib.request.urlopen(root + path, timeout=5.0) as resp:
                    data = json.loads(resp.read())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("version"):
                return str(data["version"])
        return None

    # -- requests -------------------------------------------------------------------------------------

    async def _loop_state(self) -> _LoopState:
        # Clients and semaphores belong to one event loop; a new loop (a new job phase) gets new ones.
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            client = openai.AsyncOpenAI(
                base_url=self.endpoint.base_url,
                api_key=self._api_key,
                timeout=self.endpoint.timeout_s,
                max_retries=0,  # retries are ours, so that every attempt is classified
                http_client=openai.DefaultAsyncHttpxClient(transport=StreamTransport()),
            )
            gate = asyncio.Semaphore(self.endpoint.concurrency)
            self._state = _LoopState(loop, client, gate, asyncio.Lock())
            # Close the client when its loop shuts down (asyncio.run finalises async generators), so no
            # connection outlives the loop that owns it.
            closer = _close_at_shutdown(client, self)
            await closer.__anext__()
            self._closers.append(closer)
        return self._state

    async def aclose(self) -> None:
        if self._state is not None:
            await self._state.client.close()

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
        key = request_key(str(self.endpoint.base_url), body | {"extra_body": self.endpoint.extra_body})
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                response, fingerprint = hit
                self._from_cache = self._from_cache or fingerprint
                return ChatResponse.model_validate(response | {"cached": True})
        st = await self._loop_state()
        await self._ensure_fingerprint(st)
        response = await self._send(st, body)
        if self.cache is not None:
            self.cache.put(
                key,
                str(self.endpoint.base_url),
                self.endpoint.model,
                response.model_dump(mode="json", exclude={"cached"}),
                self.fingerprint(),
            )
        return response

    async def _send(self, st: _LoopState, body: dict[str, Any]) -> ChatResponse:
        e = self.endpoint
        # The body goes out as built: the client's typed parameter transform costs milliseconds per
        # request on long conversations and would drop nothing we send. extra_body merges at top level.
        wire = {**body, **e.extra_body}
        attempt = 0
        while True:
            wait: float | None = None
            try:
                async with st.gate:
                    self.attempts += 1
                    text = await st.client.post("/chat/completions", body=wire, cast_to=str)
            except openai.APIStatusError as exc:
                code = getattr(exc, "code", None)
                kind = classify_status(exc.status_code, code, exc.message)
                last = f"HTTP {exc.status_code} {code or ''} {exc.message}".strip()
                if kind == "fatal":
                    raise EndpointError(
                        f"{e.base_url}: model {e.model!r} rejected the request with {last}; check base_url, "
                        "model, api_key_env and extra_body in the endpoint's config"
                    ) from exc
                if kind != "retry":
                    raise InfraFailure(kind, last) from exc
                wait = retry_after_s(exc.response.headers)
            except (openai.APIConnectionError, openai.APIResponseValidationError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                parsed = _parse_completion(text)
                if isinstance(parsed, ChatResponse):
                    if parsed.finish_reason == "content_filter":
                        raise InfraFailure("guardrail_rejection", "finish_reason content_filter")
                    return parsed
                last = parsed
            attempt += 1
            if attempt > e.max_retries:
                raise InfraFailure("retries_exhausted", f"{attempt} attempts; last: {last}")
            self.retries += 1
            if wait is None:
                wait = e.retry_backoff_s * 2 ** (attempt - 1) * (0.5 + _jitter.random())
            await asyncio.sleep(min(wait, e.retry_backoff_max_s))

    def cache_stats(self) -> dict[str, int]:
        s = self.cache.stats if self.cache is not None else None
        return {
            "hits": s.hits if s else 0,
            "misses": s.misses if s else 0,
            "writes": s.writes if s else 0,
            "attempts": self.attempts,
            "retries": self.retries,
        }
