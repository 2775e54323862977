"""A small HTTP/1.1 server on asyncio streams for the loopback OpenAI-compatible endpoints.

The simulator server, the fault server and the throughput benchmark all use it. It speaks just enough
HTTP for an OpenAI client (persistent connections, ``Content-Length`` bodies, JSON) and nothing else,
which keeps it fast on two cores: no framework, one coroutine per connection.

A handler that raises is a bug in our own server: it is logged with its traceback and answered with a 500
whose message names the exception, so the client sees (and records) what failed instead of a dropped
connection. A request that is not valid HTTP is answered 400 and logged. For the fault server, a reply can
also be raw bytes, dripped slowly, or followed by closing the connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Fault injection only: bytes sent instead of the encoded reply, a pause between their chunks (a
    # slow-loris answer), and closing the connection once written (without saying so in a header).
    raw: bytes | None = None
    drip_s: float = 0.0
    drip_chunk: int = 1
    close: bool = False

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, json.dumps(obj).encode(), {"content-type": "application/json", **(headers or {})})

    @classmethod
    def error(cls, status: int, message: str, code: str | None = None, **headers: str) -> Reply:
        """An error body in the shape OpenAI-compatible servers use, so the client parses ``code``."""
        err = {"message": message, "type": "invalid_request_error" if status < 500 else "server_error"}
        err["code"] = code
        return cls.json({"error": err}, status, headers)

    def encode(self) -> bytes:
        head = [f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Status')}"]
        headers = {"content-length": str(len(self.body)), **self.headers}
        head += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + self.body


Handler = Callable[[Request], Awaitable[Reply]]


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1 only. ``max_requests`` bounds how many requests it will answer."""

    def __init__(
        self,
        handler: Handler,
        port: int = 0,
        max_requests: int | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.handler = handler
        self.port = port
        self.max_requests = max_requests
        self.tls = tls  # https (tests of the client's TLS path)
        self.requests = 0
        self.connections = 0  # accepted so far
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._connection, "127.0.0.1", self.port, backlog=1024, ssl=self.tls
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the transports ends every connection's read loop; cancelling its task instead would
        # make asyncio log the cancellation as an error.
        for writer in list(self._writers):
            writer.close()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        try:
            await self._server.serve_forever()
        finally:
            await self.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            await self._requests(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (e.g. after its own timeout)
        except (asyncio.LimitOverrunError, ValueError) as exc:
            log.warning("127.0.0.1:%s: not a valid HTTP request (%s: %s)", self.port, type(exc).__name__, exc)
            if not writer.is_closing():
                writer.write(Reply.error(400, f"not a valid HTTP request: {type(exc).__name__}").encode())
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                writer.write(Reply.error(411, "send a Content-Length body").encode())
                return
            length = int(headers.get("content-length", "0") or 0)
            if length > MAX_BODY:
                writer.write(Reply.error(413, "request body too large").encode())
                return
            body = await reader.readexactly(length) if length else b""
            if self.max_requests is not None and self.requests >= self.max_requests:
                writer.write(Reply.error(503, "request budget of this test server exhausted").encode())
                await writer.drain()
                return
            self.requests += 1
            path = target.split("?", 1)[0]
            try:
                reply = await self.handler(Request(method, path, headers, body))
            except Exception as exc:  # a bug of ours: say so in the log and in the answer
                log.exception("%s %s: the handler failed", method, path)
                what = f"server handler failed: {type(exc).__name__}: {exc}"
                reply = Reply.error(500, what, "handler_error")
            await self._send(writer, reply)
            if reply.close or headers.get("connection", "").lower() == "close":
                return

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, reply: Reply) -> None:
        data = reply.encode() if reply.raw is None else reply.raw
        if not reply.drip_s:
            writer.write(data)
            await writer.drain()
            return
        for i in range(0, len(data), reply.drip_chunk):
            writer.write(data[i : i + reply.drip_chunk])
            await writer.drain()
            await asyncio.sleep(reply.drip_s)


class ServerThread:
    """Runs a LoopbackServer on its own event loop in a daemon thread (tests, benchmarks)."""

    def __init__(
        self,
        handler: Handler,
        port: int = 0,
        max_requests: int | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.server = LoopbackServer(handler, port, max_requests, tls)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        scheme = "https" if self.server.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.server.port}/v1"

    def start(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
