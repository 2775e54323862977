"""An httpcore network backend on asyncio's own transports, under the default httpx path.

Why: httpcore's default backend goes through anyio, whose stream yields to the event loop after every
write and before every read of data already received, and opens a cancel scope (a timer) for each. A
request therefore waits for the loop to come round several times between the client handing it over and
the bytes leaving, and again between the answer arriving and the client seeing it. At concurrency 256
with a busy loop each of those turns costs milliseconds, and together they added ~60 ms to a 1 s
completion (``benchmarks/endpoint_throughput.py --realistic``). This backend writes at once, returns
data already received without yielding, and only sets a timer when it actually has to wait.

Everything above the socket stays httpx's and httpcore's: the connection pool, HTTP/1.1 parsing,
keep-alive expiry, the readability check before a pooled connection is reused, TLS (through
``start_tls``). Errors are httpcore's own exception types, so httpx and the openai client map them
exactly as they map the default backend's. ``models.http_client`` puts it under every pool it builds; an
endpoint the environment routes through a proxy keeps httpx's own client whole.
"""

from __future__ import annotations

import asyncio
import collections
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

from evoaudit.models.http_library import http_core

HIGH_WATER = 1024 * 1024  # unread bytes buffered per connection before reading pauses


def _socket_readable(sock: socket.socket | None) -> bool:
    """Whether a recv() would return at once (data or the end of the stream); a gone socket counts."""
    try:
        fd = -1 if sock is None else sock.fileno()
    except OSError:
        return True
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


class _Protocol(asyncio.Protocol):
    """Buffers what arrives and wakes the one reader or writer of its connection. Past ``HIGH_WATER``
    unread bytes it stops reading from the socket until the reader catches up."""

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.paused = False  # writing: the kernel's send buffer is full
        self.transport: asyncio.Transport | None = None  # the current one (TLS replaces it)
        self.reading_paused = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > HIGH_WATER and self.transport is not None and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake_reader()
        self.paused = False
        self._wake_writer()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_writer()

    def take(self, max_bytes: int) -> bytes:
        chunk = self.chunks.popleft()
        if len(chunk) > max_bytes:
            chunk, rest = chunk[:max_bytes], chunk[max_bytes:]
            self.chunks.appendleft(rest)
        self.buffered -= len(chunk)
        if self.reading_paused and self.buffered <= HIGH_WATER // 2 and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return chunk

    def _wake_reader(self) -> None:
        w, self._read_waiter = self._read_waiter, None
        if w is not None and not w.done():
            w.set_result(None)

    def _wake_writer(self) -> None:
        w, self._drain_waiter = self._drain_waiter, None
        if w is not None and not w.done():
            w.set_result(None)

    def read_waiter(self) -> asyncio.Future[None]:
        self._read_waiter = asyncio.get_running_loop().create_future()
        return self._read_waiter

    def drain_waiter(self) -> asyncio.Future[None]:
        self._drain_waiter = asyncio.get_running_loop().create_future()
        return self._drain_waiter


async def _wait(fut: asyncio.Future[None], timeout: float | None) -> None:
    if timeout is None:
        await fut
    else:
        async with asyncio.timeout(timeout):
            await fut


class AsyncioStream:
    """httpcore's ``AsyncNetworkStream`` interface over one asyncio transport."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        protocol.transport = transport

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        if not p.chunks and not p.eof:
            try:
                await _wait(p.read_waiter(), timeout)
            except TimeoutError as exc:
                raise http_core().ReadTimeout(str(exc) or "read timed out") from exc
        if p.chunks:
            return p.take(max_bytes)
        if p.error is not None:
            raise http_core().ReadError(f"{type(p.error).__name__}: {p.error}") from p.error
        return b""  # end of stream: httpcore turns it into the right protocol error

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        p = self._protocol
        if self._transport.is_closing():
            cause = p.error
            raise http_core().WriteError(f"connection closed{f': {cause}' if cause else ''}") from cause
        self._transport.write(buffer)
        if p.paused:  # the kernel's send buffer is full: wait for it to drain, like a blocking write
            try:
                await _wait(p.drain_waiter(), timeout)
            except TimeoutError as exc:
                raise http_core().WriteTimeout(str(exc) or "write timed out") from exc
            if p.error is not None:
                raise http_core().WriteError(f"{type(p.error).__name__}: {p.error}") from p.error

    async def aclose(self) -> None:
        self._transport.abort()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncioStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self._transport.abort()
            raise http_core().ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise http_core().ConnectError(f"{type(exc).__name__}: {exc}") from exc
        if transport is None:
            raise http_core().ConnectError("the connection closed during the TLS handshake")
        return AsyncioStream(transport, self._protocol)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> Any:
        t = self._transport
        if info == "ssl_object":
            return t.get_extra_info("ssl_object")
        if info == "client_addr":
            return t.get_extra_info("sockname")
        if info == "server_addr":
            return t.get_extra_info("peername")
        if info == "socket":
            return t.get_extra_info("socket")
        if info == "is_readable":
            # An idle kept-alive connection with anything to read (bytes or the end of the stream) has
            # been closed or confused by the server: httpcore then opens a new one instead of reusing it.
            p = self._protocol
            if p.chunks or p.eof or t.is_closing():
                return True
            return _socket_readable(t.get_extra_info("socket"))
        return None


async def _connect(
    opening: Any, where: str, timeout: float | None, options: Iterable[Any] | None
) -> AsyncioStream:
    """Open a connection (``opening`` is the loop's create_* coroutine) with httpcore's errors."""
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await opening
    except TimeoutError as exc:
        raise http_core().ConnectTimeout(str(exc) or f"no connection to {where} in time") from exc
    except OSError as exc:
        raise http_core().ConnectError(f"{type(exc).__name__}: {exc}") from exc
    sock: socket.socket = transport.get_extra_info("socket")
    for option in options or ():  # asyncio already sets TCP_NODELAY
        sock.setsockopt(*option)
    return AsyncioStream(transport, protocol)


class AsyncioBackend:
    """httpcore's ``AsyncNetworkBackend`` interface on asyncio's loop."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncioStream:
        local = (local_address, 0) if local_address else None
        opening = asyncio.get_running_loop().create_connection(_Protocol, host, port, local_addr=local)
        return await _connect(opening, f"{host}:{port}", timeout, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> AsyncioStream:
        opening = asyncio.get_running_loop().create_unix_connection(_Protocol, path)
        return await _connect(opening, path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
