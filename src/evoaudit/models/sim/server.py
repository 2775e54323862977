"""``evoaudit serve-sim``: the simulator behind an OpenAI-compatible HTTP endpoint on 127.0.0.1.

The server answers with exactly what the in-process SimBackend answers for the same request, so an audit
run with ``executor.backend: openai`` pointed here reproduces the in-process tables byte for byte.

Oracle plans come from an ``OracleSource`` the caller gives (``ops/sim_oracle.py``), which follows the
endpoint-blindness rule. A server started before the freeze re-checks its source when it meets a prompt
it has no plan for, so it can serve a whole audit run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path
from typing import Protocol

from evoaudit import __version__, atomic
from evoaudit.models import probe_requests
from evoaudit.models.base import ChatRequest
from evoaudit.models.http import LoopbackServer, Reply, Request
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.models.wire import completion_json, request_from_wire

log = logging.getLogger(__name__)


class OracleSource(Protocol):
    """Where the server's oracle plans come from (``ops/sim_oracle.py`` reads the sealed instance table:
    the endpoint-blindness rule lives above this layer)."""

    def changed(self) -> bool: ...

    def load(self) -> Oracle: ...


class SimHandler:
    """Routes /v1/models, /version and /v1/chat/completions to a SimBackend."""

    def __init__(self, sim: SimBackend, latency_s: float = 0.0, source: OracleSource | None = None) -> None:
        self.sim = sim
        self.latency_s = latency_s
        self.source = source
        self.chat_requests = 0

    async def __call__(self, req: Request) -> Reply:
        path = req.path.rstrip("/")
        if req.method == "GET" and path in ("/v1/models", "/models"):
            return Reply.json(
                {
                    "object": "list",
                    "data": [{"id": self.sim.model, "object": "model", "owned_by": "evoaudit"}],
                }
            )
        if req.method == "GET" and path in ("/version", "/v1/version"):
            return Reply.json({"version": f"evoaudit-sim {__version__}"})
        if path not in ("/v1/chat/completions", "/chat/completions"):
            return Reply.error(404, f"no route {req.method} {req.path}", "not_found")
        if req.method != "POST":
            return Reply.error(405, "use POST", "method_not_allowed")
        try:
            body = req.json()
            request = request_from_wire(body)
        except (ValueError, KeyError, TypeError) as exc:
            return Reply.error(400, f"malformed chat request: {exc}", "invalid_request")
        self.chat_requests += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self._refresh_oracle(request)
        response = probe_requests.simulated_answer(request, body) or self.sim.respond(request)
        completion_id = "chatcmpl-" + hashlib.sha256(req.body).hexdigest()[:24]
        return Reply.json(completion_json(response, body.get("model") or self.sim.model, completion_id))

    def _refresh_oracle(self, request: ChatRequest) -> None:
        if self.source is None or not self.source.changed():
            return
        user = next((m for m in request.messages if m.role == "user"), None)
        if user is not None and user.content in self.sim.oracle.by_prompt:
            return
        self.sim.oracle = self.source.load()


async def serve(handler: SimHandler, port: int, ready_file: Path | None = None) -> None:
    server = LoopbackServer(handler, port)
    bound = await server.start()
    info = {"base_url": f"http://127.0.0.1:{bound}/v1", "model": handler.sim.model}
    log.warning("serving the simulator at %s", info["base_url"])
    if ready_file is not None:  # lets a caller that asked for port 0 learn the port
        atomic.write_text(ready_file, json.dumps(info) + "\n")
    await server.serve_forever()
