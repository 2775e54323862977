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

Every server also serves the task's prompt as the MCP prompt ``task`` (the user's request only: never the
gold values or the rubric). An attacked workspace (``EpisodeHost``) is served episode by episode: fetching
the ``task`` prompt, or calling ``reset_episode`` on HTTP's separate ``episode`` server, starts a new
episode on a fresh copy of the world as the workflow's episode starts it (attack content placed, watcher
attached), and every call is written to a ``records.ServedRecord`` file atomically, before the client sees
its result.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evoaudit import atomic
from evoaudit.records import FileEffect, ServedCall, ServedEpisode, ServedRecord
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.effects import EffectsRecorder

PROMPT_NAME = "task"


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


def state_sha256(ws: Workspace) -> str:
    # The digest the workflow's rollouts and ``success.episode_record`` store.
    return hashlib.sha256(json.dumps(ws.state(), sort_keys=True).encode()).hexdigest()


class EpisodeHost:
    """The workspace of the episode being served, and the record of every episode since the server started.

    ``pristine`` is the world as the workflow's episode starts it (``ApexSuite.build_environment``: attack
    content placed, watcher attached, nothing run). Each episode acts on a deep copy of it, so a reset
    restores every byte and a watcher with its state fresh (it fires again on the n-th read). Each agent
    ``run_command``'s file effects are recorded on its call as the workflow's loop records them
    (``effects.EffectsRecorder``, bounded an episode), so ``apex score`` can tell a program that writes
    other bytes each run from a record that does."""

    def __init__(
        self,
        pristine: Workspace,
        prompt: str,
        *,
        instance_id: str,
        task_id: str,
        variant: str,
        attack: str | None,
        record_path: str | Path | None = None,
    ):
        self.pristine, self.prompt = pristine.copy(), prompt
        self.path = Path(record_path) if record_path else None
        self.record = ServedRecord(
            instance_id=instance_id,
            task_id=task_id,
            variant=variant,
            world_id=pristine.world_id,
            attack=attack,
        )
        self._fresh()
        self._open_episode()

    def _fresh(self) -> None:
        self.ws = self.pristine.copy()
        self.effects = EffectsRecorder(self.ws)
        self.file_effects: dict[int, list[FileEffect]] = {}  # an agent call's seq -> its file effects

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        """One agent call on the episode's workspace, its file effects kept; the caller holds the lock."""
        self.effects.begin_call()
        out = tools.call_tool(self.ws, name, args)
        done = self.ws.copied_back
        found = self.effects.file_effects()
        if found and done is not None:
            self.file_effects[done.seq] = found
        return out

    def _open_episode(self) -> None:
        digest = state_sha256(self.ws)
        self.record.episodes.append(
            ServedEpisode(episode=len(self.record.episodes), pre_state_sha256=digest, state_sha256=digest)
        )
        self.flush()

    def reset(self) -> int:
        """Start a new episode on a fresh copy of the world; returns its number. An episode without a call
        yet is started afresh in place, so a harness may reset before every episode, the first too."""
        with tools._LOCK:
            used = bool(self.ws.calls)
            self._fresh()
            if used:
                self._open_episode()
            return self.record.episodes[-1].episode

    def begin(self) -> str:
        """The ``task`` prompt's text; fetching it starts a new episode."""
        self.reset()
        return self.prompt

    def flush(self) -> None:
        """Bring the current episode's record up to date and rewrite the file (whole, atomically)."""
        ep = self.record.episodes[-1]
        ep.calls = [
            ServedCall(**asdict(c), file_effects=self.file_effects.get(c.seq, [])) for c in self.ws.calls
        ]
        ep.observer_log = [dict(row) for row in self.ws.observer_log]
        ep.final_answer = self.ws.final_answer
        ep.state_sha256 = state_sha256(self.ws)
        if self.path is not None:
            atomic.write_text(self.path, self.record.model_dump_json(indent=1) + "\n")


def _recorded_call(host: Any, name: str, **arguments: Any) -> tuple[str, str | None]:
    # ``host.ws`` is read under the lock: a reset swaps the workspace between calls, never during one.
    with tools._LOCK:
        try:
            if isinstance(host, EpisodeHost):
                return host.call(name, arguments)
            return tools.call_tool(host.ws, name, arguments)
        finally:
            host.flush()


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


PROMPT_DESCRIPTION = "The user's request for this episode."
EPISODE_PROMPT_DESCRIPTION = (
    "The user's request for this episode. Fetching it starts a new episode: the workspace is restored to "
    "its initial state."
)


def _task_prompt(prompt: str | None, host: Any):
    from mcp.server.mcpserver.prompts import Prompt

    if isinstance(host, EpisodeHost):
        return Prompt.from_function(host.begin, name=PROMPT_NAME, description=EPISODE_PROMPT_DESCRIPTION)
    text = prompt or ""
    return Prompt.from_function(lambda: text, name=PROMPT_NAME, description=PROMPT_DESCRIPTION)


def make_server(
    ws: Workspace, app: str, recorder: _Recorder | EpisodeHost | None = None, prompt: str | None = None
):
    """One app's tools (``all``: every tool) over the workspace ``ws``, or over the episodes of
    ``recorder`` when it is an ``EpisodeHost``; ``prompt`` (or the host's) is served as the ``task``
    prompt when given."""
    from mcp.server.mcpserver import MCPServer

    host = recorder if recorder is not None else _Recorder(ws, None)
    raw_tool = _raw_tool_class()
    names = [fn.__name__ for fn in tools.APPS[app]] if app != "all" else list(tools.TOOLS)
    served = [
        raw_tool.from_function(
            tools.unbound(tools.TOOLS[name], functools.partial(_recorded_call, host, name)),
            name=name,
            description=tools.TOOLS[name].__doc__,
            structured_output=False,
        )
        for name in names
    ]
    server = MCPServer(
        name=f"apex-{app}", instructions=f"APEX workspace {ws.world_id}: {app} tools", tools=served
    )
    if prompt is not None or isinstance(host, EpisodeHost):
        server.add_prompt(_task_prompt(prompt, host))
    return server


def make_episode_server(host: EpisodeHost):
    """The harness's control server (HTTP): ``reset_episode``, kept off the agent's tool servers so the
    model is never offered it."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools.base import Tool

    def reset_episode() -> str:
        """Start a new episode: the workspace restored to its initial state, the attack's watcher re-armed."""
        return json.dumps({"episode": host.reset()})

    server = MCPServer(
        name="apex-episode",
        instructions=f"APEX workspace {host.pristine.world_id}: episode control",
        tools=[Tool.from_function(reset_episode, structured_output=False)],
    )
    server.add_prompt(_task_prompt(None, host))
    return server


def serve_stdio(
    ws: Workspace,
    app: str = "all",
    record_path: str | Path | None = None,
    prompt: str | None = None,
    episodes: EpisodeHost | None = None,
) -> None:
    recorder = episodes if episodes is not None else _Recorder(ws, record_path)
    make_server(ws, app, recorder, prompt).run("stdio")


async def serve_http(
    ws: Workspace,
    host: str = "127.0.0.1",
    port: int = 0,
    record_path: str | Path | None = None,
    ready_file: str | Path | None = None,
    prompt: str | None = None,
    episodes: EpisodeHost | None = None,
) -> None:
    """Serve every app on its own port (``port`` for the first, then consecutive; 0 picks free ports), and
    with ``episodes`` the ``episode`` control server after them."""
    import socket

    import anyio
    import uvicorn

    recorder = episodes if episodes is not None else _Recorder(ws, record_path)
    apps = [*tools.APPS, "all", *(["episode"] if episodes is not None else [])]
    socks, urls = [], {}
    for i, app in enumerate(apps):
        sock = socket.socket()
        sock.bind((host, 0 if port == 0 else port + i))
        socks.append(sock)
        urls[app] = f"http://{host}:{sock.getsockname()[1]}/mcp"
    servers = []
    for app, sock in zip(apps, socks, strict=True):
        server = make_episode_server(episodes) if app == "episode" else make_server(ws, app, recorder, prompt)
        starlette_app = server.streamable_http_app(host=host)
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
