"""``wire.structured_output: auto`` falls back, it never stops: against a server that rejects a json_schema
response format the way llama-cpp-python's does (HTTP 500 "Input should be 'text' or 'json_object'", the
same on every retry), the pre-flight passes, the role's requests go as json_object with the schema in the
prompt, said once in the log and recorded; a server that knows no response format at all gets the schema
in the prompt alone; only ``on`` stops the run."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from quirk_server_kit import QuirkHandler

from evoaudit import config as config_mod
from evoaudit.methods import reasoningbank
from evoaudit.models import openai_backend, preflight
from evoaudit.models.base import ChatRequest
from evoaudit.models.http import ServerThread
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.records import Message

MODEL = "quirk-model"
REQUEST = ChatRequest(
    messages=(Message(role="user", content="Distil this."),),
    seed=3,
    response_schema=reasoningbank.MEMORIES_SCHEMA,
)


def _cfg(tmp_path: Path, base_url: str, mode: str) -> config_mod.Config:
    endpoint = {
        "backend": "openai",
        "base_url": base_url,
        "model": MODEL,
        "timeout_s": 5,
        "max_retries": 2,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.05,
        "cache": False,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "wire": {"structured_output": mode},
    }
    return config_mod.from_dict({"optimizer": endpoint})


@pytest.fixture(autouse=True)
def _fresh_probes():
    openai_backend._STRUCTURED_PROBES.clear()
    yield
    openai_backend._STRUCTURED_PROBES.clear()


def _fallback_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "did not honour a response schema" in r.getMessage()]


def test_auto_falls_back_to_json_object_on_a_server_that_rejects_json_schema_like_llama_cpp_python(
    tmp_path, caplog
):
    server = QuirkHandler(["json_object_only"], model=MODEL)
    with ServerThread(server) as srv, caplog.at_level(logging.WARNING):
        found = preflight.check(_cfg(tmp_path, srv.base_url, "auto"))["optimizer"]
    probe = found["structured_output_probe"]
    assert probe["mode"] == "auto" and probe["enabled"] is False and probe["form"] == "json_object"
    assert probe["result"] == "refused" and "Input should be 'text' or 'json_object'" in probe["answer"]
    assert probe["fallback"]["result"] == "honoured"
    # Rejected twice byte for byte, not retried to exhaustion: two json_schema requests, one json_object.
    kinds = [(b.get("response_format") or {}).get("type") for b in server.bodies]
    assert kinds.count("json_schema") == 2 and kinds.count("json_object") == 1
    (line,) = _fallback_lines(caplog)
    assert "json_object" in line and "structured_output: auto" in line


def test_a_request_then_goes_as_json_object_with_its_schema_in_the_prompt(tmp_path, caplog):
    server = QuirkHandler(["json_object_only"], model=MODEL)
    with ServerThread(server) as srv, caplog.at_level(logging.WARNING):
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "auto").optimizer, role="optimizer")
        answer = asyncio.run(backend.complete(REQUEST)).message.content or ""
        asyncio.run(backend.complete(REQUEST.model_copy(update={"seed": 4})))
    asked = [b for b in server.bodies if b["messages"][0]["content"].startswith("Distil this.")]
    assert len(asked) == 2
    for body in asked:
        assert body["response_format"] == {"type": "json_object"}
        assert body["messages"][-1]["content"].endswith(reasoningbank.MEMORIES_SCHEMA.prompt_note())
    assert reasoningbank.parse_items(answer, 3, "success")[0].title == "some words"
    so = backend.fingerprint()["structured_output"]
    assert so["mode"] == "auto" and so["enabled"] is False and so["form"] == "json_object"
    assert "refused" in so["reason"]
    assert len(_fallback_lines(caplog)) == 1  # said once, however many requests follow


def test_a_server_that_knows_no_response_format_gets_the_schema_in_the_prompt_alone(tmp_path, caplog):
    server = QuirkHandler(["no_response_format"], model=MODEL)
    with ServerThread(server) as srv, caplog.at_level(logging.WARNING):
        found = preflight.check(_cfg(tmp_path, srv.base_url, "auto"))["optimizer"]
        openai_backend._STRUCTURED_PROBES.clear()  # a job process probes again
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "auto").optimizer, role="optimizer")
        asyncio.run(backend.complete(REQUEST))
    probe = found["structured_output_probe"]
    assert probe["form"] == "prompt" and probe["fallback"]["result"] == "refused"
    body = server.bodies[-1]
    assert "response_format" not in body
    assert body["messages"][-1]["content"].endswith(reasoningbank.MEMORIES_SCHEMA.prompt_note())
    assert backend.fingerprint()["structured_output"]["form"] == "prompt"


def test_on_still_stops_the_run_on_such_a_server(tmp_path):
    with ServerThread(QuirkHandler(["json_object_only"], model=MODEL)) as srv:
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, srv.base_url, "on"))
    assert "optimizer.wire.structured_output is on" in str(err.value)
    assert "HTTP 500" in str(err.value) and "Input should be" in str(err.value)


def test_a_request_rejected_for_its_schema_with_a_repeated_500_goes_again_with_the_schema_in_the_prompt(
    tmp_path,
):
    """A server that honoured the probe but answers a request's json_schema with the same 500 twice: that
    request goes once more with the schema in the prompt, and the endpoint keeps that form."""

    class Picky(QuirkHandler):
        def _chat(self, body: dict[str, Any]):  # the probe's schema passes, the request's does not
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema" and fmt["json_schema"]["name"] == "capital_probe":
                self.bodies.append(body)
                from evoaudit.models.http import Reply

                answer = json.dumps({"country": "France", "capital": "Paris"})
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
                return Reply.json(
                    {"id": "p", "object": "chat.completion", "model": MODEL, "choices": [choice]}
                )
            return super()._chat(body)

    server = Picky(["json_object_only"], model=MODEL)
    with ServerThread(server) as srv:
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "auto").optimizer, role="optimizer")
        asyncio.run(backend.complete(REQUEST))
    asked = [b for b in server.bodies if b["messages"][0]["content"].startswith("Distil this.")]
    assert [(b.get("response_format") or {}).get("type") for b in asked] == [
        "json_schema",
        "json_schema",
        None,
    ]
    assert backend.fingerprint()["structured_output"]["form"] == "prompt"


def test_the_findings_per_role_are_kept_with_the_run_in_its_log_and_provenance(tmp_path):
    from evoaudit.records import PreflightRecord, read_provenance

    server = QuirkHandler(["json_object_only"], model=MODEL)
    with ServerThread(server) as srv:
        cfg = _cfg(tmp_path, srv.base_url, "auto")
        found = preflight.check(cfg)
    results = tmp_path / "results"
    path = preflight.record(cfg, results, found)
    assert path == results / "logs" / "preflight.json"
    kept = PreflightRecord.read(path).roles
    assert kept["optimizer"]["structured_output_probe"]["form"] == "json_object"
    log_text = (results / "logs" / "preflight.log").read_text()
    assert log_text.startswith("pre-flight optimizer: {") and '"form": "json_object"' in log_text
    entry = read_provenance(results / "logs" / "provenance.json")["preflight.json"]
    assert entry.stage == "preflight"
    assert entry.model_extra["preflight"]["optimizer"]["structured_output_probe"]["form"] == "json_object"
    assert preflight.record(cfg, tmp_path / "none", {}) is None and not (tmp_path / "none").exists()
