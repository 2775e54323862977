"""The workspace tools served over MCP (the ``mcp`` SDK's ``MCPServer``), one server per app.

All servers of a process are bound to one in-memory workspace, so a mail sent through the ``mail`` server is
seen by ``search_mail`` at once. Every call goes through ``tools.call_tool``, which records it server side;
the record is appended to ``record_path`` as JSON lines as calls happen, so an episode driven by an external
agent is scored from the same record as one driven by our loop. A tool failure the agent should see is
returned as an MCP tool error (``isError``) carrying the message.
stdio carries one server per process: ``app="all"`` serves every tool on it. Streamable HTTP serves each
app on its own port, all in one process.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from evoaudit.suite.apex import tools
from evoaudit.suite.apex.workspace import Workspace


class _Recorder:
    def __init__(self, ws: Workspace, path: str | Path | None):
        self.ws, self.path, self.seen = ws, Path(path) if path else None, len(ws.calls)

    def flush(self) -> None:
        if self.path is None:
            return
        with self.path.open("a", encoding="utf-8") as fh:
            for rec in self.ws.calls[self.seen :]:
                fh.write(json.dumps(asdict(rec), sort_keys=True) + "\n")
        self.seen = len(self.ws.calls)


def make_server(ws: Workspace, app: str, recorder: _Recorder | None = None):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError as MCPToolError

    names = [fn.__name__ for fn in tools.APPS[app]] if app != "all" else list(tools.TOOLS)
    server = MCPServer(name=f"apex-{app}", instructions=f"APEX workspace {ws.world_id}: {app} tools")
    for name in names:
        fn = tools.TOOLS[name]

        def invoke(_name: str = name, **kwargs):
            text, error = tools.call_tool(ws, _name, kwargs)
            if recorder is not None:
                recorder.flush()
            if error is not None:
                raise MCPToolError(error)  # the SDK returns it as an isError result
            return text

        server.add_tool(
            tools.unbound(fn, lambda _i=invoke, **kw: _i(**kw)),
            name=name,
            description=fn.__doc__,
            structured_output=False,
        )
    return server


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
