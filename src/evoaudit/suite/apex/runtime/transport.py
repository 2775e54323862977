"""How an agent loop reaches a workspace's tools (``suite.apex.transport``): directly, or over MCP.

Both expose the same methods, ``schemas()``, ``call(name, args) -> (text, error)`` and ``file_effects()``:
the files the last call's program changed, as the loop records them (``records.FileEffect``). The MCP
transport talks to the workspace's MCP server through the SDK's own client (in process, over its memory
streams) from a background event loop, so a synchronous loop can use it. The SDK prefixes a tool error's
text with "Error executing tool <name>: "; that prefix is removed so the agent sees the same text either way.
"""

from __future__ import annotations

from typing import Any, Protocol

from evoaudit.records import FileEffect
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools

# The bytes of copied-back files one session records (``records.FileEffect.data``), smallest files of a
# call first: enough for the time stamps, random bytes and small reports programs write, and a bound on
# what programs add to a rollout, which the replay and report stages read whole (one call may copy back
# four times ``run_limits.file_size_mb``, 256 MiB by default). A file past it is recorded by its sha256
# alone, and replay cannot write its bytes: a nondeterministic one is then a mismatch.
RECORDED_EFFECT_BYTES = 1 << 20


class ToolTransport(Protocol):
    def schemas(self) -> tuple[dict[str, Any], ...]: ...

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]: ...

    def file_effects(self) -> list[FileEffect]: ...

    def close(self) -> None: ...


class _Effects:
    """The file effects of a session's last call, recorded within ``RECORDED_EFFECT_BYTES``."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._since = len(ws.calls)  # where the current call's records begin
        self._left = RECORDED_EFFECT_BYTES
        self._recorded: tuple[int, list[FileEffect]] | None = None  # asked twice, counted once

    def _begin(self) -> None:
        self._since = len(self.ws.calls)

    def file_effects(self) -> list[FileEffect]:
        """The files the last call's program changed (``run_command``'s copy-back), in the order applied;
        empty for any other call."""
        done = self.ws.copied_back
        if done is None or done.seq < self._since:
            return []
        if self._recorded is None or self._recorded[0] != done.seq:
            written = sorted((len(c.data), c.path) for c in done.changes if c.data is not None)
            kept = set()
            for size, path in written:
                if size <= self._left:
                    kept.add(path)
                    self._left -= size
            self._recorded = (done.seq, [_effect(c.path, c.data, c.path in kept) for c in done.changes])
        return list(self._recorded[1])


def _effect(path: str, data: bytes | None, keep_bytes: bool) -> FileEffect:
    return FileEffect.removed(path) if data is None else FileEffect.written(path, data, keep_bytes)


class DirectTransport(_Effects):
    def schemas(self) -> tuple[dict[str, Any], ...]:
        return tools.tool_schemas()

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        self._begin()
        return tools.call_tool(self.ws, name, args)

    def close(self) -> None:
        pass


class MCPTransport(_Effects):
    def __init__(self, ws: Workspace):
        from contextlib import ExitStack

        from anyio.from_thread import start_blocking_portal
        from mcp import Client

        from evoaudit.suite.apex.runtime.mcp_server import make_server

        super().__init__(ws)
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal())
        self._client = self._stack.enter_context(
            self._portal.wrap_async_context_manager(Client(make_server(ws, "all")))
        )

    def schemas(self) -> tuple[dict[str, Any], ...]:
        listed = self._portal.call(self._client.list_tools)
        return tuple(
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in listed.tools
        )

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        self._begin()
        result = self._portal.call(self._client.call_tool, name, args)
        text = "".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            text = text.removeprefix(f"Error executing tool {name}: ")
            return text, text
        return text, None

    def close(self) -> None:
        self._stack.close()


def connect(ws: Workspace, transport: str) -> ToolTransport:
    if transport == "direct":
        return DirectTransport(ws)
    if transport == "mcp":
        return MCPTransport(ws)
    raise ValueError(f"suite.apex.transport: {transport!r} is not one of direct, mcp")
