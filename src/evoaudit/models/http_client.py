"""The HTTP client under the openai backend.

It is the openai client's own httpx client, with the connection pool sized from the endpoint's
``concurrency`` (a smaller pool would queue requests inside httpx where no timeout of ours sees them),
idle keep-alive connections expired after ``keepalive_expiry_s`` (a server that closes idle connections
first is then never asked to reuse one), and the environment honoured: ``HTTP(S)_PROXY``, ``NO_PROXY``,
``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` (httpx's ``trust_env``). Above ``POOL_SHARD`` connections the
pool is split into several httpx pools (``ShardedTransport``). Each pool's connections run on asyncio's
own transports (``models.asyncio_network``); a proxied endpoint keeps httpx's client whole. httpcore
checks a pooled connection before reusing it and never resends a request the server may have read; every
resend is the backend's own, classified and logged attempt.
"""

from __future__ import annotations

import functools
import logging
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import openai

from evoaudit.config import EndpointConfig
from evoaudit.credentials import split_credentials
from evoaudit.models.asyncio_network import AsyncioBackend
from evoaudit.models.http_library import http_library

log = logging.getLogger(__name__)
_HTTP = http_library()  # httpx, or the successor the installed openai client is built on


def pool_limits(endpoint: EndpointConfig) -> Any:
    n = max(1, endpoint.concurrency)
    expiry = endpoint.keepalive_expiry_s
    return _HTTP.Limits(max_connections=n, max_keepalive_connections=n, keepalive_expiry=expiry)


def pool_transport(limits: Any) -> Any:
    """One httpx transport (one httpcore pool) whose connections run on asyncio's own transports
    (``models.asyncio_network``). httpx takes no network backend, so it is set on the pool it built,
    before that pool has opened any connection."""
    transport = _HTTP.AsyncHTTPTransport(limits=limits, trust_env=True)
    pool = getattr(transport, "_pool", None)
    if hasattr(pool, "_network_backend"):
        pool._network_backend = AsyncioBackend()  # type: ignore[union-attr]
    else:  # a future httpx: still correct on its own backend, only slower at high concurrency
        _warn_once(f"{_HTTP.__name__} {_HTTP.__version__}: its pool takes no network backend; using its own")
    return transport


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)


POOL_SHARD = 32  # connections per httpx pool: its per-request work grows with the pool's size


class ShardedTransport(_HTTP.AsyncBaseTransport):  # type: ignore[misc, name-defined]
    """Several of httpx's own pools, each of at most ``POOL_SHARD`` connections, used in turn. httpx's
    pool walks all its connections on every request; at concurrency 256 that walk cost the client more
    CPU than the rest of the rollout. Each request still goes through one ordinary httpx pool."""

    def __init__(self, limits: Any, shards: int) -> None:
        per = _HTTP.Limits(
            max_connections=-(-limits.max_connections // shards),
            max_keepalive_connections=-(-limits.max_keepalive_connections // shards),
            keepalive_expiry=limits.keepalive_expiry,
        )
        self._pools = [pool_transport(per) for _ in range(shards)]
        self._busy = [0] * shards

    async def handle_async_request(self, request: Any) -> Any:
        # The least busy pool: the backend admits at most `concurrency` requests, so one always has room.
        i = min(range(len(self._pools)), key=self._busy.__getitem__)
        self._busy[i] += 1
        try:
            return await self._pools[i].handle_async_request(request)
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


def _proxied(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    proxies = urllib.request.getproxies()
    scheme = urlsplit(url).scheme
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)


def make_http_client(endpoint: EndpointConfig) -> Any:
    """An ``httpx.AsyncClient`` for the openai client's ``http_client=``."""
    limits = pool_limits(endpoint)
    _, credentials = split_credentials(str(endpoint.base_url))
    auth = _HTTP.BasicAuth(*credentials) if credentials else None
    # httpx mounts the environment's proxies only when it builds its own transport: a proxied endpoint
    # keeps httpx's client whole (a remote endpoint, where the client's own cost does not matter).
    if _proxied(str(endpoint.base_url)):
        return openai.DefaultAsyncHttpxClient(limits=limits, trust_env=True, auth=auth)
    shards = -(-endpoint.concurrency // POOL_SHARD)
    transport = ShardedTransport(limits, shards) if shards > 1 else pool_transport(limits)
    return openai.DefaultAsyncHttpxClient(transport=transport, limits=limits, trust_env=True, auth=auth)
