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

A request that expects a JSON answer carries its schema (``ChatRequest.response_schema``); it goes out as
``response_format`` (json_schema, strict) when ``wire.structured_output`` is on, or is ``auto`` and the
server honoured the structured-output probe (``models.preflight``, run once per process and endpoint before
the first such request). The body, and so the response-cache key, holds the schema exactly when it is sent.
A probe that fails for a transient reason (429 or 5xx past the retries, no connection) decides nothing: the
request fails as one that exhausted its retries, and the next one probes again. Under ``auto``, a request
whose schema the server rejects (HTTP 400, though it honoured the probe's) is sent again once without it,
and the endpoint sends no schema for the rest of the process (recorded in the fingerprint, with the
reason); under ``on`` that rejection stops the job, naming ``<role>.wire.structured_output``.

The endpoint fingerprint (served model ids from ``/models``, server version where offered, base URL,
sampling) is fetched once, before the first live request. It never contains the API key.

Requests go through the client's low-level ``post`` with the body exactly as built here (the typed
parameter transform costs more per request than a local endpoint at high concurrency leaves), over the
HTTP client of ``models.http_client``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import threading
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from evoaudit.config import EndpointConfig
from evoaudit.credentials import redact_url
from evoaudit.errors import AuditError
from evoaudit.models import preflight, server_errors
from evoaudit.models.base import ChatRequest, ChatResponse, Fingerprint, InfraFailure
from evoaudit.models.cache import ResponseCache, request_key
from evoaudit.models.http_client import make_http_client, split_credentials
from evoaudit.models.server_errors import classify_status, retry_after_s
from evoaudit.models.wire import parse_completion, request_message
from evoaudit.offline import refuse_if_offline

log = logging.getLogger(__name__)

_jitter = random.Random()  # timing only: never feeds any recorded value
_RENDER_PROBES: dict[tuple[str, str, str], dict[str, Any]] = {}
_STRUCTURED_PROBES: dict[tuple[str, str, str], dict[str, Any]] = {}
_STRUCTURED_LOCK = threading.Lock()


class EndpointError(AuditError):
    """The endpoint refused a request in a way no retry fixes (authentication, unknown model, bad body)."""


class _SchemaRejected(Exception):
    """Under ``auto``: the server rejected a request for the response schema it carried (HTTP 400)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def _close_at_shutdown(client: openai.AsyncOpenAI, backend: OpenAIBackend) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.close()
        log.info("%s: %s", backend.url, backend.cache_stats())


@dataclass
class _LoopState:
    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    gate: asyncio.Semaphore
    fingerprint_lock: asyncio.Lock


class OpenAIBackend:
    def __init__(
        self, endpoint: EndpointConfig, *, use_cache: bool | None = None, role: str | None = None
    ) -> None:
        refuse_if_offline(role or "executor")
        if not endpoint.base_url:
            raise EndpointError("executor/optimizer base_url: required for the openai backend")
        self.endpoint = endpoint
        self.role = role  # where in the config (optimizer, apex.judge, ...), for errors that name a field
        # Credentials in the URL (user:password@, ?api_key=) never reach fingerprints, cache keys or logs.
        self.url = server_errors.redact(redact_url(str(endpoint.base_url)))  # also a bare user@
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
        structured = self._structured_record()
        if self._live is not None:
            return self._live | structured
        if self._from_cache is not None:  # every answer so far came from the cache
            return {**self._from_cache, "source": "cache"} | structured
        return (
            structured
            | Fingerprint(
                backend="openai",
                model=self.endpoint.model,
                base_url=self.url,
                sampling=self.sampling(),
            ).model_dump()
            | {"source": "not contacted"}
        )

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
                base_url=self.url,
                served_models=served,
                server_version=version,
                sampling=self.sampling(),
            ).model_dump()
            # What the server's template makes of system prompt, user turn and tool results
            # (models.preflight); a template that drops tool results stops the job.
            probe = await asyncio.to_thread(self._render_probe)
            why = preflight.dropped_message("executor/optimizer", self.endpoint, probe)
            if why is not None:
                raise EndpointError(why)
            wire = {"wire": self.endpoint.wire.model_dump(mode="json"), "render_probe": probe}
            self._live = fp | notes | wire | {"source": "live"}
            if served and self.endpoint.model not in served:
                log.warning("model %r is not among the served models %s", self.endpoint.model, served)

    def _render_probe(self) -> dict[str, Any]:
        # Once per process and endpoint: a job's backends all talk to the same server and template.
        e = self.endpoint
        ident = (str(e.base_url), e.model, e.wire.assistant_content)
        if ident not in _RENDER_PROBES:
            clean, credentials = split_credentials(str(e.base_url))  # never in a URL that is logged
            clean_endpoint = e.model_copy(update={"base_url": clean})
            with httpx.Client(timeout=min(preflight.STEP_TIMEOUT_S, e.timeout_s), auth=credentials) as client:
                _RENDER_PROBES[ident] = preflight.render_probe(client, clean_endpoint, self._api_key)
        return _RENDER_PROBES[ident]

    # -- structured output ---------------------------------------------------------------------------

    def _structured_ident(self) -> tuple[str, str, str]:
        e = self.endpoint
        return (str(e.base_url), e.model, json.dumps(e.extra_body, sort_keys=True))

    def _structured_record(self) -> dict[str, Any]:
        mode = self.endpoint.wire.structured_output
        probe = _STRUCTURED_PROBES.get(self._structured_ident()) if mode == "auto" else None
        if mode == "auto" and probe is None:
            return {}  # no request with a schema yet: nothing was decided
        record: dict[str, Any] = {"mode": mode, "enabled": self.structured_output_enabled(probe=False)}
        if probe is not None and not record["enabled"]:
            # The fallback form the requests take (models.base.STRUCTURED_FORMS), and why.
            record["form"] = self.structured_output_form(probe=False)
            record["reason"] = probe.get("reason") or _probe_reason(probe)
        return {"structured_output": record}

    def _field(self, name: str) -> str:
        role = self.role or "<role> (optimizer, apex.judge, suite.apex.attacker)"
        return f"{role}.{name}"

    def structured_output_enabled(self, *, probe: bool = True) -> bool:
        """Whether a request with a response schema sends it as ``response_format`` json_schema."""
        return self.structured_output_form(probe=probe) == "json_schema"

    def structured_output_form(self, *, probe: bool = True) -> str | None:
        """How a request with a response schema carries it (``models.base.STRUCTURED_FORMS``; None:
        ``off``, not at all). ``auto`` probes the server once per process and endpoint (``probe``; an
        unprobed endpoint then counts as taking the last form, the schema in the prompt)."""
        mode = self.endpoint.wire.structured_output
        if mode != "auto":
            return "json_schema" if mode == "on" else None
        ident = self._structured_ident()
        if ident not in _STRUCTURED_PROBES and probe:
            with _STRUCTURED_LOCK:
                if ident not in _STRUCTURED_PROBES:
                    _STRUCTURED_PROBES[ident] = self._structured_probe()
        return _STRUCTURED_PROBES.get(ident, {}).get("form") or "prompt"

    def _structured_probe(self) -> dict[str, Any]:
        e = self.endpoint
        clean, credentials = split_credentials(str(e.base_url))
        clean_endpoint = e.model_copy(update={"base_url": clean})
        where = f"{self.role or 'optimizer/judge/attacker'} ({self.url}, model {e.model!r})"
        timeout = min(preflight.STEP_TIMEOUT_S, e.timeout_s)
        with httpx.Client(timeout=timeout, auth=credentials) as client:
            try:
                found = preflight.structured_output_forms(
                    client, where, clean.rstrip("/"), clean_endpoint, self._api_key, queued=True
                )
            except preflight.PreflightError as exc:
                # A transient fault past the retries decides nothing (never a silent "off"): this request
                # fails as one that exhausted its retries, and the next request with a schema probes again.
                raise InfraFailure("retries_exhausted", f"structured-output probe: {exc}") from exc
        if found["result"] != "honoured":
            log.warning("%s", preflight.fallback_note(where, found))
        return found

    def _schema_rejected(self, detail: str) -> None:
        """Latch ``auto`` off for this endpoint for the rest of the process, once (and warn once)."""
        ident = self._structured_ident()
        with _STRUCTURED_LOCK:
            had = _STRUCTURED_PROBES.get(ident, {})
            if had.get("result") == "rejected":
                return
            reason = (
                f"a request with its response schema was rejected ({detail}); sent again with the schema "
                "in the prompt alone"
            )
            latched = {"result": "rejected", "form": "prompt", "answer": detail, "reason": reason}
            latched["probe"] = had
            _STRUCTURED_PROBES[ident] = latched
        log.warning(
            "%s: the server rejected a request's response schema although it honoured the probe's (%s); "
            "requests that expect JSON carry the schema in the prompt alone for the rest of this process "
            "(%s: auto)",
            self.url,
            detail,
            self._field("wire.structured_output"),
        )

    def _server_version(self) -> str | None:
        # vLLM and SGLang answer /version at the server root; Ollama answers /api/version.
        root, credentials = split_credentials(str(self.endpoint.base_url))
        root = root.rstrip("/").removesuffix("/v1")
        headers = {}
        if credentials:  # the URL's credentials, as basic auth like every other request
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
        for path in ("/version", "/api/version"):
            try:
                request = urllib.request.Request(root + path, headers=headers)
                with urllib.request.urlopen(request, timeout=5.0) as resp:
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
                base_url=split_credentials(str(self.endpoint.base_url))[0],  # the rest goes as basic auth
                api_key=self._api_key,
                timeout=self.endpoint.timeout_s,
                max_retries=0,  # retries are ours, so that every attempt is classified
                http_client=make_http_client(self.endpoint),
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

    def request_body(self, request: ChatRequest, structured: bool | str | None = None) -> dict[str, Any]:
        """The request as sent. ``structured``: how a response schema goes out, a form of
        ``models.base.STRUCTURED_FORMS`` (True: json_schema, False: not at all; default: as
        ``wire.structured_output`` decides, probing the server once under ``auto``)."""
        e = self.endpoint
        if request.runner_messages is not None:
            return self._runner_body(request)
        body: dict[str, Any] = {
            "model": e.model,
            "messages": [request_message(m, e.wire.assistant_content) for m in request.messages],
            "temperature": e.temperature,  # sent even when 0
            "max_tokens": e.max_tokens,
        }
        if request.tools:
            body["tools"] = list(request.tools)
            # Some servers (llama-cpp-python's function-calling handler) drop the tools without it.
            if request.tool_choice is not None:  # the request's own (the tool filter's question)
                body["tool_choice"] = request.tool_choice
            elif e.wire.tool_choice is not None:
                body["tool_choice"] = e.wire.tool_choice
        if e.send_seed and request.seed is not None:
            body["seed"] = request.seed
        if request.response_schema is not None:
            if structured is None:
                form = self.structured_output_form()
            else:
                form = {True: "json_schema", False: None}.get(structured, structured)  # type: ignore[arg-type]
            if form in ("json_schema", "json_object"):
                body["response_format"] = request.response_schema.response_format(form)
            if form in ("json_object", "prompt"):
                body["messages"] = _with_note(body["messages"], request.response_schema.prompt_note())
        return body

    def _runner_body(self, request: ChatRequest) -> dict[str, Any]:
        """The body a benchmark runner's own client sends (``agent.profile``), built by that client's code
        (``request.runner_body``; AgentDojo's ``chat_completion_request``) from its messages, its tools, the
        endpoint's model and temperature; no max_tokens, seed or wire setting. ``extra_body`` still merges
        when the request goes out."""
        if request.runner_body is None:
            raise ValueError("a request with runner_messages needs runner_body (agent.profile)")
        e = self.endpoint
        return request.runner_body(
            e.model, list(request.runner_messages or ()), list(request.tools), e.temperature
        )

    def cache_key(self, body: dict[str, Any]) -> str:
        return request_key(self.url, body | {"extra_body": self.endpoint.extra_body})

    async def _cached(self, key: str) -> ChatResponse | None:
        assert self.cache is not None
        hit = await self.cache.aget(key)  # off the event loop (models.cache)
        if hit is not None and not self._same_server(hit[1]):
            hit = None  # answered by another server build or model list: never reused
        if hit is None:
            return None
        response, fingerprint = hit
        self._from_cache = self._from_cache or fingerprint
        return ChatResponse.model_validate(response | {"cached": True})

    def _undecided(self, request: ChatRequest) -> bool:
        return (
            request.response_schema is not None
            and self.endpoint.wire.structured_output == "auto"
            and self._structured_ident() not in _STRUCTURED_PROBES
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if self.cache is not None and self._undecided(request):
            # Sent with its schema, this request was answered before by a server that honoured the probe:
            # a cached run needs no probe (and no server).
            hit = await self._cached(self.cache_key(self.request_body(request, structured=True)))
            if hit is not None:
                return hit
        if self._undecided(request):
            await asyncio.to_thread(self.structured_output_enabled)
        body = self.request_body(request)
        key = None
        if self.cache is not None:
            key = self.cache_key(body)
            hit = await self._cached(key)
            if hit is not None:
                return hit
        st = await self._loop_state()
        await self._ensure_fingerprint(st)
        try:
            response = await self._send(st, body, request)
        except _SchemaRejected as rejected:
            # Once more with the schema in the prompt alone (and so under that request's key); a request
            # the server refuses so too was not refused for its response_format, and stops the job as usual.
            body = self.request_body(request, structured="prompt")
            if self.cache is not None:
                key = self.cache_key(body)
                hit = await self._cached(key)
                if hit is not None:
                    self._schema_rejected(rejected.detail)
                    return hit
            try:
                response = await self._send(st, body, request)
            except InfraFailure:
                self._schema_rejected(rejected.detail)
                raise
            self._schema_rejected(rejected.detail)
        if self.cache is not None and key is not None:
            sent = response.model_dump(mode="json", exclude={"cached"})
            stored = await self.cache.aput(
                key,
                self.url,
                self.endpoint.model,
                sent,
                self.fingerprint(),
                stale=lambda fp: not self._same_server(fp),
            )
            if stored != sent:
                # The same request was answered first elsewhere (a concurrent job or episode): record that
                # answer, the one a rerun reads back, not ours.
                log.info("request %s was answered first by another caller; that answer is used", key[:12])
                response = ChatResponse.model_validate(stored)
        return response

    async def _send(
        self, st: _LoopState, body: dict[str, Any], request: ChatRequest | None = None
    ) -> ChatResponse:
        e = self.endpoint
        # The body goes out as built: the client's typed parameter transform costs milliseconds per
        # request on long conversations and would drop nothing we send. extra_body merges at top level.
        wire = {**body, **e.extra_body}
        rejection = server_errors.RepeatedRejection(wire)
        secrets = (self._api_key,)
        attempt = 0
        while True:
            wait: float | None = None
            try:
                async with st.gate:
                    self.attempts += 1
                    # A whole-answer deadline too: httpx's timeouts bound each read, so an answer that
                    # trickles in a few bytes at a time (slow loris) would otherwise never time out.
                    # (asyncio.timeout, unlike wait_for, runs the request in this task, not a new one.)
                    async with asyncio.timeout(e.timeout_s):
                        text = await st.client.post("/chat/completions", body=wire, cast_to=str)
            except openai.APIStatusError as exc:
                code = getattr(exc, "code", None)
                kind = classify_status(exc.status_code, code, exc.message)
                raw = server_errors.body_text(exc.response)
                last = server_errors.detail(exc.status_code, raw or exc.message, secrets)
                log.warning("%s: attempt %d: %s", self.url, attempt + 1, last)
                if kind == "fatal" and exc.status_code == 400 and "response_format" in body:
                    if e.wire.structured_output == "auto":
                        raise _SchemaRejected(last) from exc
                    setting = self._field("wire.structured_output")
                    raise EndpointError(
                        f"{self.url}: model {e.model!r} rejected a request carrying a response schema "
                        f"(response_format json_schema) with {last}; not retried: {setting} is on, so every "
                        f"request that expects JSON sends its schema. Set {setting} to auto (such a request "
                        "then goes once more without it) or off, or check the model and extra_body"
                    ) from exc
                if kind == "fatal":
                    field = server_errors.hint_field(exc.status_code, raw or exc.message)
                    fix = f" ({server_errors.base_url_fix(self.url)})" if field == "base_url" else ""
                    raise EndpointError(
                        f"{self.url}: model {e.model!r} rejected the request with {last}; not retried: "
                        f"check the {field} of the role (executor, optimizer, ...) using this endpoint{fix}"
                    ) from exc
                if kind != "retry":
                    raise InfraFailure(kind, last) from exc
                if rejection.repeated(exc.status_code, raw):
                    # The same request got the same 500 twice: the server rejects this request (under
                    # auto, one carrying response_format goes again without it, as after a 400).
                    if "response_format" in body and e.wire.structured_output == "auto":
                        raise _SchemaRejected(f"{last} (twice on an identical request)") from exc
                    raise InfraFailure("request_rejected", f"{last} (twice on an identical request)") from exc
                wait = retry_after_s(exc.response.headers)
            except openai.APIConnectionError as exc:
                last = server_errors.connection_detail(exc, str(e.base_url))
                log.warning("%s: attempt %d: %s", self.url, attempt + 1, last)
            except TimeoutError:
                last = f"no complete answer within timeout_s {e.timeout_s:g} (the response trickled in)"
                log.warning("%s: attempt %d: %s", self.url, attempt + 1, last)
            except openai.APIResponseValidationError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                # A runner's own client reads native tool_calls only (agent.profile).
                runner = request is not None and request.runner_messages is not None
                text_calls = e.wire.parse_text_tool_calls and not runner
                parsed = parse_completion(text, request, parse_text_calls=text_calls)
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

    def _same_server(self, cached: dict[str, Any]) -> bool:
        """Once the server has been contacted, a cached answer counts only if the same model list and
        server version produced it (before any contact there is nothing to compare it with)."""
        if self._live is None:
            return True
        return all(cached.get(k) == self._live.get(k) for k in ("model", "served_models", "server_version"))

    def cache_stats(self) -> dict[str, int]:
        s = self.cache.stats if self.cache is not None else None
        return {
            "hits": s.hits if s else 0,
            "misses": s.misses if s else 0,
            "writes": s.writes if s else 0,
            "attempts": self.attempts,
            "retries": self.retries,
        }


def _with_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """``messages`` with ``note`` added to the last user message's text (a new user turn only when there is
    none: some chat templates refuse two user turns in a row)."""
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i].get("role") == "user" and isinstance(out[i].get("content"), str):
            out[i] = {**out[i], "content": f"{out[i]['content']}\n\n{note}"}
            return out
    return [*out, {"role": "user", "content": note}]


def _probe_reason(probe: dict[str, Any]) -> str:
    problem = f", {probe['problem']}" if probe.get("problem") else ""
    return f"the structured-output probe was {probe.get('result')}{problem}"
