"""The workspace tools served over MCP (the ``mcp`` SDK's ``MCPServer``), one server per app.

All servers of a process are bound to one in-memory workspace, so a mail sent through the ``mail`` server is
seen by ``search_mail`` at once. Every call goes through ``tools.call_tool``, which records it server side;
the record is appended to ``record_path`` as JSON lines as calls happen, so an episode driven by an external
agent is scored from the same record as one driven by our loop. A tool failure the agent should see is
returned as an MCP tool error (``isError``) carrying the message. The server hands the client's arguments to
the tool layer as sent (``tools.call_tool`` checks them against the tool's signature), so a call with bad
arguments is recorded and answered with the same text as on the direct transport.
stdio carries one server per process: ``app="all"`` serves every tool on it. Streamable HTTP serves each
app on its own port, all in one process.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evoaudit.suite.apex import tools
from evoaudit.suite.apex.workspace import Workspace


class _Recorder:
    """Appends the workspace's new call records to ``path``, one JSON line each.

    Called under ``tools._LOCK`` right after each call, so the lines are the calls in the order they ran,
    each once, on disk before the client sees the result."""

    def __init__(self, ws: Workspace, path: str | Path | None):
        self.ws, self.path, self.seen = ws, Path(path) if path else None, len(ws.calls)

    def flush(self) -> None:
        if self.path is None:
            return
        new = self.ws.calls[self.seen :]
        if new:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(asdict(rec), sort_keys=True) + "\n" for rec in new))
        self.seen = len(self.ws.calls)


def _recorded_call(
    ws: Workspace, name: str, recorder: _Recorder | None, **arguments: Any
) -> tuple[str, str | None]:
    with tools._LOCK:
        try:
            return tools.call_tool(ws, name, arguments)
        finally:
            if recorder is not None:
                recorder.flush()


def _raw_tool_class():
    from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
    from mcp.server.mcpserver.exceptions import UnexpectedToolError
    from mcp.server.mcpserver.tools.base import Tool

    class RawArgumentsTool(Tool):
        """A tool that hands the client's arguments to ``tools.call_tool`` as sent. The SDK would validate
        them first and reject a bad call before it reached the tool layer, so that call would go unrecorded
        and its error text would differ from the direct transport's; the tool layer checks them itself."""

        async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
            import anyio.to_thread

            try:
                text, error = await anyio.to_thread.run_sync(functools.partial(self.fn, **arguments))
            except Exception as exc:
                # A bug of ours, already in the record: the client gets the SDK's generic crash text.
                raise UnexpectedToolError(f"Error executing tool {self.name}") from exc
            if error is not None:
                raise MCPToolError(f"Error executing tool {self.name}: {error}")  # an isError result
            return self.fn_metadata.convert_result(text) if convert_result else text

    return RawArgumentsTool


def make_server(ws: Workspace, app: str, recorder: _Recorder | None = None):
    from mcp.server.mcpserver import MCPServer

    raw_tool = _raw_tool_class()
    names = [fn.__name__ for fn in tools.APPS[app]] if app != "all" else list(tools.TOOLS)
    served = [
        raw_tool.from_function(
            tools.unbound(tools.TOOLS[name], functools.partial(_recorded_call, ws, name, recorder)),
            name=name,
            description=tools.TOOLS[name].__doc__,
            structured_output=False,
        )
        for name in names
    ]
    return MCPServer(
        name=f"apex-{app}", instructions=f"APEX workspace {ws.world_id}: {app} tools", tools=served
    )


def serve_stdio(ws: Workspace, app: str = "all", record_path: str | Path | None = None) -> None:
    make_server(ws, app, _Recorder(ws, record_path)).run("stdio")


async def serve_http(
    ws: Workspace,
    host: str = "127.0.0.1",
    port: int = 0,
    record_path: str | Path | None = None,
    ready_file: str | Path | None = None,
) -> None:
    """Serve every app on its own port (``port`` for the first, then consecutive; 0 picks free ports)."""
    import socket

    import anyio
    import uvicorn

    recorder = _Recorder(ws, record_path)
    apps = [*tools.APPS, "all"]
    socks, urls = [], {}
    for i, app in enumerate(apps):
        sock = socket.socket()
        sock.bind((host, 0 if port == 0 else port + i))
        socks.append(sock)
        urls[app] = f"http://{host}:{sock.getsockname()[1]}/mcp"
    servers = []
    for app, sock in zip(apps, socks, strict=True):
        starlette_app = make_server(ws, app, recorder).streamable_http_app(host=host)
        config = uvicorn.Config(starlette_app, log_level="warning", lifespan="on")
        servers.append((uvicorn.Server(config), sock))
    async with anyio.create_task_group() as tg:
        for srv, sock in servers:
            tg.start_soon(srv.serve, [sock])
        while not all(s.started for s, _ in servers):
            await anyio.sleep(0.05)
        if ready_file:
            Path(ready_file).write_text(
                json.dumps({"world_id": ws.world_id, "servers": urls}, indent=2) + "\n"
            )
