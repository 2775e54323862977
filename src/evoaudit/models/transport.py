"""A lean HTTP/1.1 transport for the openai client, for plain-http endpoints (local servers).

Why: on small machines the default transport's per-request work is dominated by system calls (it writes
a request's headers and body separately and polls each pooled socket before reuse); against a local
vLLM/SGLang/llama.cpp server at high concurrency that, not the model, capped throughput. This transport
writes each request with one call and keeps a simple pool of keep-alive connections on asyncio streams.
It plugs in below the openai client (``http_client=``), so request building, authentication, error
mapping and every response check stay the client's own.

It is opt-in (``transport: stream``; ``models.http_client`` refuses it for https and proxied endpoints).
A pooled connection is dropped, not reused, once idle past the keep-alive expiry or when the server has
closed it (end of stream seen, or unexpected bytes waiting). A request is never resent by the transport:
a failure on a reused connection is an error the backend classifies, logs and counts as an attempt.
Oversized heads become protocol errors; 1xx heads are skipped; 204, 304 and HEAD answers have no body.

It is written against whichever HTTP library the installed openai client uses (``httpx`` or its
successor), found from the client's own default HTTP client class.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import select
import time
from types import ModuleType
from typing import Any

import openai


def http_library() -> ModuleType:
    """The HTTP library the installed openai client is built on."""
    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root not in ("openai", "builtins"):
            return importlib.import_module(root)
    return importlib.import_module("httpx")


@functools.cache
def http_core() -> ModuleType:
    """The httpcore package under the HTTP library (``httpcore``, or its successor's)."""
    pool = type(http_library().AsyncHTTPTransport()._pool)
    return importlib.import_module(pool.__module__.split(".")[0])


_HTTP = http_library()
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
MAX_HEAD = 1024 * 1024  # the stream limit: a longer response head is a protocol error, not a crash


def _usable(conn: _Conn) -> bool:
    """A kept-alive connection is reused only if the server has neither closed it nor sent anything: an
    idle connection with something to read has reached its end (or the server is confused)."""
    reader, writer = conn
    if writer.is_closing() or reader.at_eof() or len(getattr(reader, "_buffer", b"")):
        return False
    sock = writer.get_extra_info("socket")
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


async def _read_body(
    reader: asyncio.StreamReader, headers: dict[bytes, bytes], status: int, method: bytes
) -> tuple[bytes, bool]:
    """The response body and whether the connection may be reused."""
    if status in (204, 304) or method == b"HEAD":
        return b"", True
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(parts), True
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    if b"content-length" in headers:
        return await reader.readexactly(int(headers[b"content-length"])), True
    return await reader.read(), False  # delimited by the end of the connection


class StreamTransport(_HTTP.AsyncBaseTransport):  # type: ignore[misc, name-defined]
    def __init__(self, max_idle: int = 64, keepalive_expiry_s: float = 5.0) -> None:
        self._idle: dict[tuple[str, int], list[tuple[float, _Conn]]] = {}
        self.max_idle = max_idle
        self.keepalive_expiry_s = keepalive_expiry_s

    def _pooled(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key) or []
        now = time.monotonic()
        while idle:
            since, conn = idle.pop()
            if now - since < self.keepalive_expiry_s and _usable(conn):
                return conn
            conn[1].close()
        return None

    async def handle_async_request(self, request: Any) -> Any:
        if request.url.scheme != "http":
            raise _HTTP.UnsupportedProtocol(
                f"the stream transport serves plain http only, not {request.url.scheme}", request=request
            )
        body = await request.aread()
        head = [f"{request.method} ".encode() + request.url.raw_path + b" HTTP/1.1"]
        head += [k + b": " + v for k, v in request.headers.raw]
        payload = b"\r\n".join(head) + b"\r\n\r\n" + body
        timeouts = request.extensions.get("timeout") or {}
        key = (request.url.host, request.url.port or 80)
        conn = self._pooled(key) or await self._connect(key, timeouts, request)
        try:
            exchanged = await self._exchange(conn, payload, timeouts, request)
        except BaseException:
            conn[1].close()
            raise
        status, headers, raw_headers, content, keep = exchanged
        idle = self._idle.setdefault(key, [])
        if keep and headers.get(b"connection", b"").lower() != b"close" and len(idle) < self.max_idle:
            idle.append((time.monotonic(), conn))
        else:
            conn[1].close()
        return _HTTP.Response(
            status, headers=raw_headers, content=content, extensions={"http_version": b"HTTP/1.1"}
        )

    async def _connect(self, key: tuple[str, int], timeouts: dict, request: Any) -> _Conn:
        try:
            opening = asyncio.open_connection(*key, limit=MAX_HEAD)
            return await asyncio.wait_for(opening, timeouts.get("connect"))
        except TimeoutError as exc:
            raise _HTTP.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out", request=request) from exc
        except OSError as exc:
            raise _HTTP.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc}", request=request) from exc

    async def _exchange(
        self, conn: _Conn, payload: bytes, timeouts: dict, request: Any
    ) -> tuple[int, dict[bytes, bytes], list[tuple[bytes, bytes]], bytes, bool]:
        reader, writer = conn
        try:
            writer.write(payload)
            await asyncio.wait_for(writer.drain(), timeouts.get("write"))
        except TimeoutError as exc:
            raise _HTTP.WriteTimeout("sending the request timed out", request=request) from exc
        except OSError as exc:
            raise _HTTP.WriteError(str(exc), request=request) from exc
        method = request.method.encode() if isinstance(request.method, str) else request.method

        async def receive() -> tuple[int, dict[bytes, bytes], list[tuple[bytes, bytes]], bytes, bool]:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head[:-4].split(b"\r\n")
                status = int(lines[0].split(b" ", 2)[1])
                if not 100 <= status < 200:
                    break  # 1xx heads (100 Continue, 103 Early Hints) precede the answer
            raw = [tuple(p.strip() for p in line.split(b":", 1)) for line in lines[1:] if b":" in line]
            headers = {k.lower(): v for k, v in raw}
            content, keep = await _read_body(reader, headers, status, method)
            return status, headers, raw, content, keep  # type: ignore[return-value]

        try:
            return await asyncio.wait_for(receive(), timeouts.get("read"))
        except TimeoutError as exc:
            raise _HTTP.ReadTimeout("reading the response timed out", request=request) from exc
        except asyncio.IncompleteReadError as exc:
            raise _HTTP.RemoteProtocolError(
                "the server closed the connection mid-response", request=request
            ) from exc
        except asyncio.LimitOverrunError as exc:
            raise _HTTP.RemoteProtocolError(
                f"the response head is longer than {MAX_HEAD} bytes", request=request
            ) from exc
        except (OSError, ValueError, IndexError) as exc:
            raise _HTTP.ReadError(f"malformed or failed response: {exc}", request=request) from exc

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for _, (_, writer) in conns:
                writer.close()
        self._idle.clear()
