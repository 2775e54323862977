"""A lean HTTP/1.1 transport for the openai client, for plain-http endpoints (local servers).

Why: on small machines the default transport's per-request work is dominated by system calls (it writes
a request's headers and body separately and polls each pooled socket before reuse); against a local
vLLM/SGLang/llama.cpp server at high concurrency that, not the model, capped throughput. This transport
writes each request with one call and keeps a simple pool of keep-alive connections on asyncio streams.
It plugs in below the openai client (``http_client=``), so request building, authentication, error
mapping and every response check stay the client's own. https endpoints use the client's default
transport.

It is written against whichever HTTP library the installed openai client uses (``httpx`` or its
successor), found from the client's own default HTTP client class.
"""

from __future__ import annotations

import asyncio
import importlib
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


_HTTP = http_library()
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Closed(Exception):
    """A pooled connection the server had already closed; the request is resent on a new one."""


async def _read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> tuple[bytes, bool]:
    """The response body and whether the connection may be reused."""
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
    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._fallback: Any = None

    async def handle_async_request(self, request: Any) -> Any:
        if request.url.scheme != "http":
            if self._fallback is None:
                self._fallback = _HTTP.AsyncHTTPTransport()
            return await self._fallback.handle_async_request(request)
        body = await request.aread()
        head = [f"{request.method} ".encode() + request.url.raw_path + b" HTTP/1.1"]
        head += [k + b": " + v for k, v in request.headers.raw]
        payload = b"\r\n".join(head) + b"\r\n\r\n" + body
        timeouts = request.extensions.get("timeout") or {}
        key = (request.url.host, request.url.port or 80)
        for attempt in range(2):
            reused = bool(self._idle.get(key))
            conn = self._idle[key].pop() if reused else await self._connect(key, timeouts, request)
            try:
                status, headers, raw_headers, content, keep = await self._exchange(
                    conn, payload, timeouts, request, reused
                )
            except _Closed:
                if attempt == 0:
                    continue
                raise _HTTP.RemoteProtocolError("the server closed the connection", request=request) from None
            except BaseException:
                conn[1].close()
                raise
            if keep and headers.get(b"connection", b"").lower() != b"close":
                self._idle.setdefault(key, []).append(conn)
            else:
                conn[1].close()
            return _HTTP.Response(
                status, headers=raw_headers, content=content, extensions={"http_version": b"HTTP/1.1"}
            )
        raise AssertionError("unreachable")

    async def _connect(self, key: tuple[str, int], timeouts: dict, request: Any) -> _Conn:
        try:
            return await asyncio.wait_for(asyncio.open_connection(*key), timeouts.get("connect"))
        except TimeoutError as exc:
            raise _HTTP.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out", request=request) from exc
        except OSError as exc:
            raise _HTTP.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc}", request=request) from exc

    async def _exchange(
        self, conn: _Conn, payload: bytes, timeouts: dict, request: Any, reused: bool
    ) -> tuple[int, dict[bytes, bytes], list[tuple[bytes, bytes]], bytes, bool]:
        reader, writer = conn
        try:
            writer.write(payload)
            await asyncio.wait_for(writer.drain(), timeouts.get("write"))
        except TimeoutError as exc:
            raise _HTTP.WriteTimeout("sending the request timed out", request=request) from exc
        except OSError as exc:
            writer.close()
            if reused:
                raise _Closed from exc
            raise _HTTP.WriteError(str(exc), request=request) from exc

        async def receive() -> tuple[int, dict[bytes, bytes], list[tuple[bytes, bytes]], bytes, bool]:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head[:-4].split(b"\r\n")
            status = int(lines[0].split(b" ", 2)[1])
            raw = [tuple(p.strip() for p in line.split(b":", 1)) for line in lines[1:] if b":" in line]
            headers = {k.lower(): v for k, v in raw}
            content, keep = await _read_body(reader, headers)
            return status, headers, raw, content, keep  # type: ignore[return-value]

        try:
            return await asyncio.wait_for(receive(), timeouts.get("read"))
        except TimeoutError as exc:
            raise _HTTP.ReadTimeout("reading the response timed out", request=request) from exc
        except asyncio.IncompleteReadError as exc:
            if reused and not exc.partial:
                raise _Closed from exc
            raise _HTTP.RemoteProtocolError(
                "the server closed the connection mid-response", request=request
            ) from exc
        except (OSError, ValueError, IndexError) as exc:
            raise _HTTP.ReadError(f"malformed or failed response: {exc}", request=request) from exc

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for _, writer in conns:
                writer.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()
