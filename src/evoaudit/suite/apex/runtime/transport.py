"""How an agent loop reaches a workspace's tools (``suite.apex.transport``): directly, or over MCP.

Both expose the same methods, ``schemas()``, ``call(name, args) -> (text, error)`` and ``file_effects()``:
the files the last call's program changed, as the loop records them (``records.FileEffect``, bounded by
``effects.RECORDED_EFFECT_BYTES``). The MCP transport talks to the workspace's MCP server through the
SDK's own client (in process, over its memory streams) from a background event loop, so a synchronous loop
can use it. The SDK prefixes a tool error's
text with "Error executing tool <name>: "; that prefix is removed so the agent sees the same text either way.
"""

from __future__ import annotations

from typing import Any, Protocol

from evoaudit.records import FileEffect
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.effects import RECORDED_EFFECT_BYTES, EffectsRecorder

__all__ = ["RECORDED_EFFECT_BYTES", "DirectTransport", "MCPTransport", "ToolTransport", "connect"]


class ToolTransport(Protocol):
    def schemas(self) -> tuple[dict[str, Any], ...]: ...

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]: ...

    def file_effects(self) -> list[FileEffect]: ...

    def close(self) -> None: ...


class DirectTransport(EffectsRecorder):
    def schemas(self) -> tuple[dict[str, Any], ...]:
        return tools.tool_schemas()

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        self.begin_call()
        return tools.call_tool(self.ws, name, args)

    def close(self) -> None:
        pass


class MCPTransport(EffectsRecorder):
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
        self.begin_call()
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
