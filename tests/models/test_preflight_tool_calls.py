"""The pre-flight's tool-call probe over real loopback HTTP: a native call passes, a call written in the text
stops the run naming the setting that reads it (and passes with it), no call at all is a warning that
quotes the answer."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from evoaudit import config as config_mod
from evoaudit.models import preflight
from evoaudit.models.http import Reply, Request, ServerThread

MODEL = "probe-model"
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


@dataclass
class ToolServer:
    """Answers ``/models``, the one-token completion with "OK", and a request with tools with ``answer``
    (an assistant message as it goes on the wire), after the statuses in ``faults`` (one per request)."""

    answer: dict[str, Any]
    faults: list[int] = field(default_factory=list)
    tool_bodies: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, req: Request) -> Reply:
        path = req.path.rstrip("/")
        if req.method == "GET" and path == "/v1/models":
            return Reply.json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if path != "/v1/chat/completions":
            return Reply.error(404, f"no route {req.path}", "not_found")
        body = req.json()
        message: dict[str, Any] = {"role": "assistant", "content": "OK"}
        if body.get("tools"):
            self.tool_bodies.append(body)
            if self.faults:
                status = self.faults.pop(0)
                return Reply.error(status, f"fault {status} (request {len(self.tool_bodies)})", None)
            message = {"role": "assistant", "content": None, **self.answer}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return Reply.json({"id": "c1", "object": "chat.completion", "model": MODEL, "choices": [choice]})


def _native() -> dict[str, Any]:
    call = {"name": "get_weather", "arguments": json.dumps(WEATHER_CALL["arguments"])}
    return {"tool_calls": [{"id": "call_w", "type": "function", "function": call}]}


def _cfg(tmp_path: Path, base_url: str, wire: dict[str, Any] | None = None, **roles) -> config_mod.Config:
    ep = {
        "backend": "openai",
        "base_url": base_url,
        "model": MODEL,
        "timeout_s": 5,
        "max_retries": 3,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.05,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "wire": wire or {},
    }
    return config_mod.from_dict({"executor": ep, **roles})


def test_a_native_tool_call_passes_and_is_recorded(tmp_path):
    server = ToolServer(_native())
    with ServerThread(server) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url))["executor"]
    assert found["tool_call_probe"] == {
        "result": "native",
        "calls": ["get_weather"],
        "finish_reason": "tool_calls",
    }
    (sent,) = server.tool_bodies
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert sent["tool_choice"] == "auto" and "Paris" in sent["messages"][0]["content"]


TEXT_SHAPES = {
    "bare": json.dumps(WEATHER_CALL),
    "tag": f"<tool_call>\n{json.dumps(WEATHER_CALL)}\n</tool_call>",
    "fence": f"Sure, let me check.\n```json\n{json.dumps(WEATHER_CALL)}\n```",
}


@pytest.mark.parametrize("shape", sorted(TEXT_SHAPES))
def test_a_call_written_as_text_stops_the_run_naming_the_setting(tmp_path, shape):
    with ServerThread(ToolServer({"content": TEXT_SHAPES[shape]})) as srv:
        start = time.monotonic()
        with pytest.raises(preflight.PreflightError, match="wrote the call in its answer's text") as err:
            preflight.check(_cfg(tmp_path, srv.base_url))
    assert time.monotonic() - start < 10
    assert "Set executor.wire.parse_text_tool_calls: true" in str(err.value)
    assert "get_weather" in str(err.value)  # the answer, quoted


@pytest.mark.parametrize("shape", sorted(TEXT_SHAPES))
def test_a_call_written_as_text_passes_when_text_calls_are_parsed(tmp_path, shape):
    with ServerThread(ToolServer({"content": TEXT_SHAPES[shape]})) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url, {"parse_text_tool_calls": True}))["executor"]
    assert found["tool_call_probe"]["result"] == "text"
    assert found["tool_call_probe"]["calls"] == ["get_weather"]


def test_the_setting_named_is_the_role_probed(tmp_path):
    with ServerThread(ToolServer({"content": TEXT_SHAPES["bare"]})) as srv:
        endpoint = _cfg(tmp_path, srv.base_url).executor
        with pytest.raises(
            preflight.PreflightError, match=r"transfer\.executor\.wire\.parse_text_tool_calls"
        ):
            preflight.check_endpoint("transfer.executor", endpoint, "not-needed")


def test_no_tool_call_is_a_warning_that_quotes_the_answer(tmp_path, caplog):
    prose = "I cannot browse the internet, but Paris is usually mild in spring."
    with ServerThread(ToolServer({"content": prose})) as srv:
        with caplog.at_level(logging.WARNING, logger="evoaudit.models.preflight"):
            found = preflight.check(_cfg(tmp_path, srv.base_url))["executor"]
    assert found["tool_call_probe"] == {"result": "none", "answer": prose, "finish_reason": "stop"}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "called no tool" in warned[0] and repr(prose) in warned[0]


def test_a_call_of_a_tool_not_offered_is_no_call(tmp_path, caplog):
    other = json.dumps({"name": "get_balance", "arguments": {}})
    with ServerThread(ToolServer({"content": other})) as srv:
        with caplog.at_level(logging.WARNING, logger="evoaudit.models.preflight"):
            found = preflight.check(_cfg(tmp_path, srv.base_url))["executor"]
    assert found["tool_call_probe"]["result"] == "none"


def test_transient_faults_of_the_tool_probe_are_retried(tmp_path):
    server = ToolServer(_native(), faults=[429, 503, 500])
    with ServerThread(server) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url))["executor"]
    assert len(server.tool_bodies) == 4 and found["tool_call_probe"]["result"] == "native"


def test_a_server_refusing_tools_stops_the_run_with_its_reason(tmp_path):
    server = ToolServer(_native(), faults=[400])
    with ServerThread(server) as srv:
        with pytest.raises(preflight.PreflightError, match="a request with a tool was refused") as err:
            preflight.check(_cfg(tmp_path, srv.base_url))
    assert "fault 400" in str(err.value) and "executor.wire.tool_choice" in str(err.value)
    assert len(server.tool_bodies) == 1  # a refusal is not retried


def test_the_optimizer_is_not_asked_to_call_a_tool(tmp_path):
    server = ToolServer({"content": TEXT_SHAPES["bare"]})
    with ServerThread(server) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        optimizer = cfg.executor.model_dump(mode="json")
        cfg = _cfg(tmp_path, srv.base_url, optimizer=optimizer, executor={"backend": "sim"})
        found = preflight.check(cfg)
    assert list(found) == ["optimizer"] and "tool_call_probe" not in found["optimizer"]
    assert server.tool_bodies == []


def test_the_simulator_backend_has_no_network_preflight():
    cfg = config_mod.from_dict({})
    assert cfg.executor.backend == "sim" and preflight.check(cfg) == {}


def test_the_simulator_served_over_http_passes_the_probe_with_a_native_call(tmp_path):
    from evoaudit.models.sim.server import SimHandler
    from evoaudit.models.sim.tools import Oracle, SimBackend

    sim = SimBackend(Oracle.from_instances([], []), config_mod.from_dict({}).sim)
    with ServerThread(SimHandler(sim)) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        cfg = cfg.model_copy(update={"executor": cfg.executor.model_copy(update={"model": sim.model})})
        found = preflight.check(cfg)["executor"]
    assert found["tool_call_probe"]["result"] == "native"
    assert found["tool_call_probe"]["calls"] == ["get_weather"]


def _profile_cfg(tmp_path: Path, base_url: str) -> config_mod.Config:
    cfg = _cfg(tmp_path, base_url, agent={"profile": "agentdojo"}, transfer={"enabled": False})
    assert cfg.agent.profile == "agentdojo"
    return cfg


def test_under_the_agentdojo_profile_the_probe_sends_the_runners_own_request(tmp_path):
    server = ToolServer(_native())
    with ServerThread(server) as srv:
        found = preflight.check(_profile_cfg(tmp_path, srv.base_url))["executor"]
    assert found["tool_call_probe"]["result"] == "native"
    (sent,) = server.tool_bodies
    # AgentDojo's client: content as a list of text parts, tool_choice auto, no temperature at 0.
    assert sent["messages"][0]["role"] == "user" and sent["messages"][0]["content"][0]["type"] == "text"
    assert "Paris" in sent["messages"][0]["content"][0]["text"]
    assert sent["tool_choice"] == "auto" and "temperature" not in sent and "seed" not in sent


@pytest.mark.parametrize("shape", sorted(TEXT_SHAPES))
def test_under_the_agentdojo_profile_a_text_call_names_the_servers_template_not_the_parser(tmp_path, shape):
    with ServerThread(ToolServer({"content": TEXT_SHAPES[shape]})) as srv:
        with pytest.raises(preflight.PreflightError, match="wrote the call in its answer's text") as err:
            preflight.check(_profile_cfg(tmp_path, srv.base_url))
    text = str(err.value)
    assert "--chat-template-file" in text and "--tool-call-parser" in text and "agentdojo" in text
    assert "Set executor.wire.parse_text_tool_calls: true" not in text


@dataclass
class BusyServer(ToolServer):
    """Lists the model, then keeps every completion waiting, as a server whose slots other clients hold."""

    async def __call__(self, req: Request) -> Reply:
        if req.path.rstrip("/") == "/v1/chat/completions":
            await anyio.sleep(2)
        return await super().__call__(req)


def test_a_server_too_busy_to_answer_in_time_stops_the_run_saying_what_to_do(tmp_path):
    cfg = _cfg(tmp_path, "http://127.0.0.1:1/v1")
    with ServerThread(BusyServer(_native())) as srv:
        ep = cfg.executor.model_copy(update={"base_url": srv.base_url, "timeout_s": 1, "max_retries": 0})
        with pytest.raises(preflight.PreflightError, match=r"waits 1 s; if other runs .* more slots"):
            preflight.check(cfg.model_copy(update={"executor": ep}))
