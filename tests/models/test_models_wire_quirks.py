"""Servers as users run them, over real loopback HTTP: every quirk of the quirk server, the rendered-prompt
probe, errors that carry the server's reason, and the pre-flight that stops a run in seconds."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import time
from pathlib import Path

import pytest
from fault_server_kit import FaultHandler
from quirk_server_kit import QUIRKS, QuirkHandler

from evoaudit import config as config_mod
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models import openai_backend, preflight
from evoaudit.models.http import Reply, ServerThread
from evoaudit.models.openai_backend import EndpointError, OpenAIBackend
from evoaudit.models.server_errors import detail, redact
from evoaudit.models.text_calls import find_text_calls
from evoaudit.records import Rollout, ToolCall
from evoaudit.suite.agentdojo.banking.instances import official_instances


@pytest.fixture(autouse=True)
def _fresh_render_probes(monkeypatch):
    # The backend remembers a probe per base URL for the process; each test here has its own server.
    monkeypatch.setattr(openai_backend, "_RENDER_PROBES", {})


@functools.cache
def _instance():
    return official_instances(["user_task_0"])[0]


def _cfg(tmp_path: Path, base_url: str, model: str = "quirk-model", **extra) -> config_mod.Config:
    wire = extra.pop("wire", {})
    ep = {
        "backend": "openai",
        "base_url": base_url,
        "model": model,
        "timeout_s": 2,
        "max_retries": 4,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.05,
        "cache": False,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "wire": wire,
    }
    return config_mod.from_dict(
        {"executor": ep | extra, "suite": {"goals": ["injection_task_0"]}, "agent": {"max_steps": 4}}
    )


def _episode(tmp_path: Path, handler: QuirkHandler, **extra) -> Rollout:
    spec = plan_episodes("L1", "static", "benign", [_instance()], [])[0]
    with ServerThread(handler, max_requests=60) as srv:
        cfg = _cfg(tmp_path, srv.base_url, **extra)
        return asyncio.run(run_one(cfg, OpenAIBackend(cfg.executor), spec, cfg.agent.system_prompt, None))


def _tool_round_trip(handler: QuirkHandler) -> bool:
    """A request carried a tool result and got a 200."""
    return any(
        status == 200 and any(m["role"] == "tool" for m in body["messages"])
        for body, status in zip(handler.bodies, handler.statuses, strict=True)
    )


def test_every_quirk_is_documented_and_covered_here():
    # The response-format quirks are covered beside structured output's fallback.
    fallback = Path(__file__).with_name("test_structured_output_fallback.py")
    here = Path(__file__).read_text() + fallback.read_text()
    assert all(f'"{q}"' in here for q in QUIRKS), [q for q in QUIRKS if f'"{q}"' not in here]


def test_tool_choice_auto_is_sent_so_a_server_that_needs_it_calls_tools(tmp_path):
    handler = QuirkHandler(["needs_tool_choice"])
    rollout = _episode(tmp_path, handler)
    assert all(b["tool_choice"] == "auto" for b in handler.bodies if b.get("tools"))
    assert rollout.calls and _tool_round_trip(handler)
    # The quirk bites: without tool_choice the same server never calls a tool.
    handler = QuirkHandler(["needs_tool_choice"])
    rollout = _episode(tmp_path, handler, wire={"tool_choice": None})
    assert "tool_choice" not in handler.bodies[0] and not rollout.calls


def test_tool_only_assistant_turn_carries_empty_content_and_the_server_accepts_it(tmp_path):
    handler = QuirkHandler(["rejects_null_content"])
    rollout = _episode(tmp_path, handler)
    assert rollout.outcome.infra_failure is None and set(handler.statuses) == {200}
    assert _tool_round_trip(handler)
    sent = [m for m in handler.bodies[1]["messages"] if m["role"] == "assistant"]
    assert sent and sent[0]["content"] == "" and sent[0]["tool_calls"]


@pytest.mark.parametrize("policy", ["null", "omit"])
def test_a_repeated_500_on_the_same_request_is_a_rejection_with_the_servers_reason(tmp_path, policy):
    handler = QuirkHandler(["rejects_null_content"])
    start = time.monotonic()
    rollout = _episode(tmp_path, handler, wire={"assistant_content": policy})
    assert time.monotonic() - start < 10
    assert rollout.outcome.infra_failure == "request_rejected"
    assert "Input should be a valid string" in rollout.outcome.infra_failure_detail
    assert handler.statuses.count(500) == 2  # not max_retries + 1 attempts
    second = [m for m in handler.bodies[1]["messages"] if m["role"] == "assistant"][0]
    assert (
        ("content" in second and second["content"] is None) if policy == "null" else "content" not in second
    )


@pytest.mark.parametrize(
    "quirk",
    [
        "args_object",
        "missing_ids",
        "duplicate_ids",
        "stop_with_calls",
        "parallel_calls",
        "reasoning_content",
        "reasoning",
    ],
)
def test_answers_in_each_servers_shape_make_the_same_tool_round_trip(tmp_path, quirk):
    handler = QuirkHandler([quirk])
    rollout = _episode(tmp_path, handler)
    assert rollout.outcome.infra_failure is None
    assert rollout.calls and all(c.error is None and c.args is not None for c in rollout.calls)
    assert _tool_round_trip(handler)
    ids = [tc.id for m in rollout.messages for tc in m.tool_calls]
    assert ids and len(ids) == len(set(ids)) and all(ids)
    # every tool result answers a call of the turn before it
    results = [m.tool_call_id for m in rollout.messages if m.role == "tool"]
    assert results == ids
    if quirk == "parallel_calls":
        assert [c.function for c in rollout.calls] == ["get_most_recent_transactions", "get_balance"]
    if quirk.startswith("reasoning"):
        kept = [m.reasoning for m in rollout.messages if m.role == "assistant"]
        assert all(kept) and "read comes first" not in rollout.final_output
        assert all("reasoning" not in json.dumps(m) for b in handler.bodies for m in b["messages"])


@pytest.mark.parametrize("quirk", ["hermes_text", "llama3_text", "mistral_text"])
def test_calls_left_as_text_are_textual_actions_and_parsed_only_when_asked(tmp_path, quirk):
    handler = QuirkHandler([quirk])
    rollout = _episode(tmp_path, handler)
    assert rollout.outcome.textual_action and not rollout.calls
    handler = QuirkHandler([quirk])
    rollout = _episode(tmp_path, handler, wire={"parse_text_tool_calls": True})
    assert rollout.outcome.textual_action
    assert [c.function for c in rollout.calls] == ["get_most_recent_transactions"]
    assert rollout.calls[0].args == {"n": 5}
    first = rollout.messages[2]
    assert first.tool_calls_from_text and first.tool_calls[0].id == "call_2_0"
    assert _tool_round_trip(handler)


class _JsonLinesModel:
    """Answers as Qwen2.5-Coder-0.5B on llama-server --jinja was seen to: its first call as a bare JSON
    object in the content, its next two as JSON objects on separate lines, then a final answer."""

    model = "quirk-model"

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def __call__(self, req):
        if req.method == "GET":
            return Reply.json({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if req.path.rstrip("/") != "/v1/chat/completions":
            return Reply.error(404, f"no route {req.path}", "not_found")
        body = req.json()
        self.bodies.append(body)
        results = sum(m["role"] == "tool" for m in body["messages"])
        recent = json.dumps({"name": "get_most_recent_transactions", "arguments": {"n": 10}})
        balance = json.dumps({"name": "get_balance", "arguments": {}})
        content = {0: recent, 1: f"{balance}\n{recent}"}.get(results, "Your balance is fine.")
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        return Reply.json({"id": f"c{len(self.bodies)}", "object": "chat.completion", "choices": [choice]})


def test_calls_written_as_json_lines_after_a_first_call_are_all_executed_when_parsed(tmp_path):
    rollout = _episode(tmp_path, _JsonLinesModel())
    assert not rollout.calls and rollout.outcome.textual_action  # parsing off: nothing runs
    rollout = _episode(tmp_path, _JsonLinesModel(), wire={"parse_text_tool_calls": True})
    assert [c.function for c in rollout.calls] == [
        "get_most_recent_transactions",
        "get_balance",
        "get_most_recent_transactions",
    ]
    assert rollout.final_output == "Your balance is fine."
    ids = [tc.id for m in rollout.messages for tc in m.tool_calls]
    assert ids == ["call_2_0", "call_4_0", "call_4_1"]
    assert [m.tool_call_id for m in rollout.messages if m.role == "tool"] == ids


def test_text_calls_of_unknown_tools_or_plain_prose_are_not_calls():
    known = {"send_money"}
    assert find_text_calls('{"name": "rm_rf", "parameters": {}}', known) is None
    assert find_text_calls("I will send the money now.", known) is None
    found = find_text_calls('Sure.\n[TOOL_CALLS] [{"name": "send_money", "arguments": {"amount": 1}}]', known)
    assert found and found.shape == "mistral" and found.rest == "Sure."
    assert json.loads(found.calls[0].arguments) == {"amount": 1}


@pytest.mark.parametrize("render", ["render_apply_template", "render_tokenize"])
def test_rendered_prompt_probe_goes_into_the_fingerprint(tmp_path, render):
    handler = QuirkHandler([render])
    rollout = _episode(tmp_path, handler)
    probe = rollout.executor["render_probe"]
    assert probe["via"] == render.removeprefix("render_").replace("_", "-")
    assert probe["system"] and probe["user"] and probe["tool_result"]


def test_without_a_render_endpoint_exposure_is_client_side(tmp_path):
    rollout = _episode(tmp_path, QuirkHandler())
    assert rollout.executor["render_probe"]["via"] == "client-side"
    assert rollout.executor["render_probe"]["tool_result"] is None


@pytest.mark.parametrize("render", ["render_apply_template", "render_tokenize"])
def test_a_template_that_drops_tool_results_stops_the_run_unless_overridden(tmp_path, render):
    handler = QuirkHandler([render, "template_drops_tool"])
    with ServerThread(handler) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        with pytest.raises(preflight.PreflightError, match="without tool results") as err:
            preflight.check(cfg)
        assert "allow_dropped_tool_results" in str(err.value)
        spec = plan_episodes("L1", "static", "benign", [_instance()], [])[0]
        with pytest.raises(EndpointError, match="without tool results"):
            asyncio.run(run_one(cfg, OpenAIBackend(cfg.executor), spec, "sys", None))
        cfg = _cfg(tmp_path, srv.base_url, wire={"allow_dropped_tool_results": True})
        found = preflight.check(cfg)["executor"]
        assert found["render_probe"]["tool_result"] is False and found["render_probe"]["system"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_preflight_fails_fast_on_an_unreachable_endpoint(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    start = time.monotonic()
    with pytest.raises(preflight.PreflightError, match="connection refused") as err:
        preflight.check(_cfg(tmp_path, url))
    assert time.monotonic() - start < 30
    assert url in str(err.value) and "executor.base_url" in str(err.value)


def test_preflight_fails_fast_on_a_wrong_model_with_the_served_list(tmp_path):
    with ServerThread(QuirkHandler(model="served-7")) as srv:
        start = time.monotonic()
        with pytest.raises(preflight.PreflightError, match="does not serve model 'nope'") as err:
            preflight.check(_cfg(tmp_path, srv.base_url, model="nope"))
    assert time.monotonic() - start < 30 and "served-7" in str(err.value)


def test_preflight_fails_fast_on_a_wrong_key_with_the_servers_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOAUDIT_QUIRK_KEY", "sk-wrong-" + "1" * 20)
    with ServerThread(QuirkHandler(api_key="sk-right-" + "2" * 20)) as srv:
        start = time.monotonic()
        with pytest.raises(preflight.PreflightError, match="refused the API key") as err:
            preflight.check(_cfg(tmp_path, srv.base_url, api_key_env="EVOAUDIT_QUIRK_KEY"))
    assert time.monotonic() - start < 30
    assert "Incorrect API key provided" in str(err.value) and "1" * 20 not in str(err.value)


def test_preflight_passes_and_reports_what_it_found(tmp_path):
    with ServerThread(QuirkHandler(["render_apply_template"])) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url))["executor"]
    assert found["served_models"] == ["quirk-model"]
    assert found["render_probe"]["via"] == "apply-template" and found["render_probe"]["tool_result"]


def test_preflight_rides_out_transient_faults_of_its_one_token_completion(tmp_path):
    handler = FaultHandler(["rate_limit", "server_error", "mid_body_disconnect"], retry_after_s=0.01)
    with ServerThread(handler) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url, model=handler.model))["executor"]
    faults = [s.fault for s in handler.seen]
    assert faults == ["rate_limit", "server_error", "mid_body_disconnect", "ok", "ok"]
    assert [bool(s.body.get("tools")) for s in handler.seen] == [False] * 4 + [True]  # then the tool probe
    assert found["served_models"] == [handler.model]


def test_preflight_stops_once_a_fault_outlasts_max_retries_naming_it(tmp_path):
    handler = FaultHandler(["server_error"] * 10)
    with ServerThread(handler) as srv:
        with pytest.raises(preflight.PreflightError, match="one-token completion was refused: HTTP 500"):
            preflight.check(_cfg(tmp_path, srv.base_url, model=handler.model))
    assert len(handler.seen) == 5  # max_retries 4: the first try and four more


def test_error_details_are_trimmed_and_carry_no_secret():
    body = json.dumps(
        {"error": {"message": "bad key sk-abcdefghijklmnop for http://u:pw@host/v1 " + "x" * 2000}}
    )
    text = detail(401, body, ("sk-abcdefghijklmnop",))
    assert text.startswith("HTTP 401: bad key") and len(text) < 700
    assert "abcdefghijklmnop" not in text and "u:pw" not in text
    assert "[redacted]" in redact("Authorization: Bearer abcdef123456")


def test_the_workflow_stops_before_any_job_when_the_endpoint_is_unreachable(tmp_path):
    from conftest import copy_workflow, snakemake

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    root = copy_workflow(tmp_path, {"executor": {"backend": "openai", "base_url": url, "model": "m"}})
    start = time.monotonic()
    proc = snakemake(root, check=False)
    # A guard against retrying a refused connection for minutes, not a speed target: a loaded 2-core
    # machine takes about 30 s for the parse and the pre-flight alone.
    assert time.monotonic() - start < 120
    assert proc.returncode != 0
    assert f"connection refused by {url}" in proc.stderr
    # No job ran: only the owner marker the run claimed its results_dir with is there.
    assert [p.name for p in (root / "results").iterdir()] == [".evoaudit-owner.json"]


def test_assigned_call_ids_are_the_same_for_the_same_answer():
    from evoaudit.models.base import ChatRequest
    from evoaudit.models.wire import parse_completion
    from evoaudit.records import Message

    prior = Message(role="assistant", tool_calls=[ToolCall(id="call_0", name="get_balance", arguments="{}")])
    request = ChatRequest(messages=(Message(role="user", content="hi"), prior))
    body = json.dumps(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "call_0", "function": {"name": "get_balance", "arguments": {}}},
                            {"function": {"name": "get_iban", "arguments": "{}"}},
                        ],
                    },
                    "finish_reason": "stop",
                }
            ]
        }
    )
    first, again = parse_completion(body, request), parse_completion(body, request)
    assert [tc.id for tc in first.message.tool_calls] == ["call_2_0", "call_2_1"]
    assert first == again and first.message.tool_calls[0].arguments == "{}"
