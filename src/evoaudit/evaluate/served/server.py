"""One AgentDojo instance served over MCP (the ``mcp`` SDK's ``MCPServer``), every call recorded.

The tools are the suite's own: each call goes to the session the workflow's loop uses
(``SuiteEnvironment.open_tools``: AgentDojo's ``FunctionsRuntime`` over AgentDojo's environment), and each
tool is listed with the schema the workflow sends the model (``SuiteEnvironment.tool_schemas``). The
client's arguments reach the runtime as sent, so a call with bad arguments is recorded and answered with
AgentDojo's own error text, as in the workflow's episode; a failed call is an MCP tool error (``isError``)
carrying that text.

Besides the tools the server gives two prompts: ``task``, the user's request (fetching it starts a new
episode on a fresh environment, injections placed), and ``system``, the system prompt the workflow's
executor would start from (with a frozen artifact's sections when one is served). Two control tools end
and restart episodes: ``submit_answer`` (the agent's final answer, which the task checks may read) and
``reset_episode``. Over streamable HTTP they sit on a server of their own (the ``control`` URL), so the
suite's tool server offers exactly the suite's tools; stdio carries one server, and the control tools are
listed beside the suite's (a harness leaves them out of what it offers its model).

Every call is written to the record (``record.AgentServedRecord``) atomically before the client sees its
result.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from evoaudit import atomic
from evoaudit.config import Config
from evoaudit.evaluate.served.instance import ServedInstance
from evoaudit.evaluate.served.record import AgentServedCall, AgentServedEpisode, AgentServedRecord
from evoaudit.records import recordable

TASK_PROMPT = "task"
SYSTEM_PROMPT = "system"
CONTROL_TOOLS = ("submit_answer", "reset_episode")


class EpisodeHost:
    """The environment of the episode being served and the record of every episode since the start.

    ``pristine`` is the environment as the workflow's episode starts it; each episode acts on a deep copy
    (``SuiteEnvironment.copy_environment``), so a reset restores it exactly."""

    def __init__(self, served: ServedInstance, record_path: str | Path | None = None):
        self.served = served
        self.suite = served.suite
        self.pristine = served.build_environment()
        self.path = Path(record_path) if record_path else None
        self.record = AgentServedRecord(
            suite=self.suite.name,
            instance_id=served.instance.instance_id,
            goal=served.goal,
            injections=dict(served.injections),
            system_prompt=served.system,
            condition=served.condition,
            artifact_sha256=served.artifact_sha256,
            config_sha256=served.config_sha256,
        )
        self.lock = threading.Lock()
        self._fresh()
        self._open_episode()

    def _fresh(self) -> None:
        self.env = self.suite.copy_environment(self.pristine)
        self.session = self.suite.open_tools(self.env, None)

    def _open_episode(self) -> None:
        digest = self.suite.state_sha256(self.env)
        self.record.episodes.append(
            AgentServedEpisode(
                episode=len(self.record.episodes), pre_state_sha256=digest, state_sha256=digest
            )
        )
        self._write()

    @property
    def current(self) -> AgentServedEpisode:
        return self.record.episodes[-1]

    def reset(self) -> int:
        """Start a new episode on a fresh environment; returns its number. An episode with no call and no
        answer yet is started afresh in place, so a harness may reset before every episode, the first too."""
        with self.lock:
            used = bool(self.current.calls) or self.current.final_output is not None
            self.session.close()
            self._fresh()
            if used:
                self._open_episode()
            return self.current.episode

    def begin(self) -> str:
        """The ``task`` prompt's text; fetching it starts a new episode."""
        self.reset()
        return self.served.prompt

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        """One tool call through the suite's session, recorded before it is answered."""
        with self.lock:
            text, error = self.session.call(name, args)
            ep = self.current
            ep.calls.append(
                AgentServedCall(
                    seq=len(ep.calls), function=name, args=recordable(args), result=text, error=error
                )
            )
            ep.state_sha256 = self.suite.state_sha256(self.env)
            self._write()
            return text, error

    def submit(self, answer: str) -> int:
        """Record ``answer`` as the current episode's final answer (a later one replaces it)."""
        with self.lock:
            self.current.final_output = answer
            self._write()
            return self.current.episode

    def _write(self) -> None:
        if self.path is not None:
            atomic.write_text(self.path, self.record.model_dump_json(indent=1) + "\n")


def _raw_tool_class():
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.server.mcpserver.tools.base import Tool

    class RawArgumentsTool(Tool):
        """A tool whose arguments reach ``fn`` as the client sent them: the SDK would otherwise validate them
        first and refuse a bad call before the runtime saw it (unrecorded, with other text than AgentDojo's).
        ``fn`` returns (text, error)."""

        async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
            import anyio.to_thread

            try:
                text, error = await anyio.to_thread.run_sync(self.fn, dict(arguments or {}))
            except Exception as exc:
                raise UnexpectedToolError(f"Error executing tool {self.name}") from exc
            if error is not None:
                raise ToolError(error)  # an isError result carrying the runtime's text
            return self.fn_metadata.convert_result(text) if convert_result else text

    return RawArgumentsTool


def _tool(raw: Any, name: str, description: str, parameters: dict[str, Any], fn: Any) -> Any:
    def placeholder() -> str:  # the signature the SDK inspects; the schema is replaced below
        return ""

    tool = raw.from_function(placeholder, name=name, description=description, structured_output=False)
    return tool.model_copy(update={"fn": fn, "parameters": parameters})


def _control_tools(host: EpisodeHost) -> list[Any]:
    raw = _raw_tool_class()

    def submit(args: dict[str, Any]) -> tuple[str, str | None]:
        answer = args.get("answer")
        if not isinstance(answer, str):
            return "submit_answer: argument 'answer' (a string) is required", "answer missing"
        return json.dumps({"episode": host.submit(answer)}), None

    def reset(args: dict[str, Any]) -> tuple[str, str | None]:
        return json.dumps({"episode": host.reset()}), None

    return [
        _tool(
            raw,
            "submit_answer",
            "Hand over the final answer of this episode (the user's request answered). Not a tool of the "
            "suite: the audit reads it as the agent's final message.",
            {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
            submit,
        ),
        _tool(
            raw,
            "reset_episode",
            "Start a new episode: the environment restored to its initial state, injections in place.",
            {"type": "object", "properties": {}},
            reset,
        ),
    ]


def _prompts(server: Any, host: EpisodeHost) -> None:
    from mcp.server.mcpserver.prompts import Prompt

    system = host.served.system
    server.add_prompt(
        Prompt.from_function(
            host.begin,
            name=TASK_PROMPT,
            description="The user's request. Fetching it starts a new episode on a fresh environment.",
        )
    )
    server.add_prompt(
        Prompt.from_function(
            lambda: system,
            name=SYSTEM_PROMPT,
            description="The system prompt the audit's executor starts from (with the served artifact).",
        )
    )


def make_server(host: EpisodeHost, control: bool = True) -> Any:
    """The suite's tools over ``host``'s episodes, with the ``task`` and ``system`` prompts; ``control``:
    the control tools too (stdio's one server)."""
    from mcp.server.mcpserver import MCPServer

    raw = _raw_tool_class()
    schemas = host.suite.tool_schemas()
    clash = sorted({s["function"]["name"] for s in schemas} & set(CONTROL_TOOLS))
    if clash:
        raise ValueError(f"suite {host.suite.name}: tools {clash} clash with the served control tools")
    tools = [
        _tool(
            raw,
            s["function"]["name"],
            s["function"].get("description") or "",
            s["function"]["parameters"],
            lambda args, name=s["function"]["name"]: host.call(name, args),
        )
        for s in schemas
    ]
    if control:
        tools += _control_tools(host)
    server = MCPServer(
        name=f"evoaudit-{host.suite.name}",
        instructions=f"AgentDojo {host.suite.name}, instance {host.served.instance.instance_id}",
        tools=tools,
    )
    _prompts(server, host)
    return server


def make_control_server(host: EpisodeHost) -> Any:
    """HTTP's control server: ``submit_answer`` and ``reset_episode``, and the same prompts."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        name=f"evoaudit-{host.suite.name}-control",
        instructions="episode control: submit the final answer, reset the environment",
        tools=_control_tools(host),
    )
    _prompts(server, host)
    return server


def serve_stdio(host: EpisodeHost) -> None:
    make_server(host, control=True).run("stdio")


@contextlib.asynccontextmanager
async def http_servers(
    host: EpisodeHost, bind: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[dict[str, str]]:
    """The tool server on ``port`` (0: a free one) and the control server on the next (or a free one),
    listening while the context is open; yields their URLs ``{tools, control}``."""
    import socket

    import anyio
    import uvicorn

    servers, urls = [], {}
    pairs = (("tools", make_server(host, control=False)), ("control", make_control_server(host)))
    for i, (key, server) in enumerate(pairs):
        sock = socket.socket()
        sock.bind((bind, 0 if port == 0 else port + i))
        urls[key] = f"http://{bind}:{sock.getsockname()[1]}/mcp"
        config = uvicorn.Config(server.streamable_http_app(host=bind), log_level="warning", lifespan="on")
        servers.append((uvicorn.Server(config), sock))
    async with anyio.create_task_group() as tg:
        for srv, sock in servers:
            tg.start_soon(srv.serve, [sock])
        while not all(s.started for s, _ in servers):
            await anyio.sleep(0.05)
        try:
            yield urls
        finally:
            for srv, _ in servers:
                srv.should_exit = True


async def serve_http(
    host: EpisodeHost, bind: str = "127.0.0.1", port: int = 0, ready_file: str | Path | None = None
) -> None:
    """Serve over streamable HTTP until stopped; the URLs go to stdout and ``ready_file`` once listening."""
    import anyio

    async with http_servers(host, bind, port) as urls:
        info = {
            "suite": host.suite.name,
            "instance_id": host.served.instance.instance_id,
            "goal": host.served.goal,
            "servers": urls,
        }
        print(json.dumps(info), flush=True)
        if ready_file:
            atomic.write_text(ready_file, json.dumps(info, indent=2) + "\n")
        await anyio.sleep_forever()


def serve(
    cfg: Config,
    instance_id: str,
    goal: str | None,
    condition_name: str | None,
    artifact_dir: str | None,
    transport: str,
    port: int = 0,
    record: str | None = None,
    ready_file: str | None = None,
) -> None:
    """Serve ``instance_id`` of ``cfg``'s suite (``instance.served_instance``) until stopped."""
    from evoaudit.evaluate.served.instance import served_instance

    host = EpisodeHost(served_instance(cfg, instance_id, goal, condition_name, artifact_dir), record)
    if transport == "stdio":
        serve_stdio(host)
        return
    import anyio

    try:
        anyio.run(lambda: serve_http(host, "127.0.0.1", port, ready_file))
    except KeyboardInterrupt:
        pass
