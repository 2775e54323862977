"""The openai backend over real loopback HTTP: faults end in the right record, the cache, sampling on the
wire, the fingerprint, bounded concurrency, and the simulator served over HTTP answering as in-process."""

from __future__ import annotations

import asyncio
import functools
import json
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest
from fault_server_kit import FaultHandler

from evoaudit import config as config_mod
from evoaudit.agent.prompt import opening_messages
from evoaudit.evaluate.runner import plan_episodes, run_one, run_specs
from evoaudit.jsonl import read_records
from evoaudit.models.base import ChatRequest, InfraFailure
from evoaudit.models.http import ServerThread
from evoaudit.models.openai_backend import EndpointError, OpenAIBackend, classify_status
from evoaudit.models.sim.server import SimHandler
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.records import Rollout
from evoaudit.suite.agentdojo.banking.instances import official_instances

FAMILIES = ("user_task_0", "user_task_3", "user_task_13")
GOALS = ["injection_task_0", "injection_task_4"]


@functools.cache
def _instances():
    return official_instances(FAMILIES)


def _cfg(tmp_path: Path, base_url: str | None = None, **executor) -> config_mod.Config:
    ep = {
        "backend": "openai" if base_url else "sim",
        "base_url": base_url,
        "timeout_s": 0.5,
        "max_retries": 2,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.5,
        "cache": False,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "concurrency": 4,
    }
    return config_mod.from_dict(
        {"executor": ep | executor, "suite": {"goals": GOALS}, "agent": {"max_steps": 12}}
    )


def _sim(cfg: config_mod.Config) -> SimBackend:
    return SimBackend(Oracle.from_instances(list(_instances()), GOALS), cfg.sim)


def _specs(arm: str = "attacked"):
    return plan_episodes("L1", "static", arm, list(_instances()), GOALS)


def _run(cfg, backend, specs, out: Path) -> list[Rollout]:
    system = cfg.agent.system_prompt
    return asyncio.run(run_specs(cfg, backend, specs, system, None, out))


def _one(cfg, backend, spec) -> Rollout:
    return asyncio.run(run_one(cfg, backend, spec, cfg.agent.system_prompt, None))


def test_served_simulator_answers_exactly_as_in_process(tmp_path):
    cfg_sim = _cfg(tmp_path)
    specs = _specs() + _specs("benign")
    local = [_one(cfg_sim, _sim(cfg_sim), s) for s in specs]
    with ServerThread(SimHandler(_sim(cfg_sim))) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        remote = _run(cfg, OpenAIBackend(cfg.executor), specs, tmp_path / "shard.jsonl")
    assert [r.rollout_id for r in remote] == [s.rollout_id for s in specs]
    for a, b in zip(local, remote, strict=True):
        assert a.messages == b.messages
        assert a.outcome == b.outcome
    assert any(r.outcome.exposed for r in remote) and any(r.outcome.utility for r in remote)


@pytest.mark.parametrize(
    ("schedule", "infra", "sent"),
    [
        (["rate_limit"], None, "recovered"),
        (["server_error", "server_error"], None, "recovered"),
        (["stall"], None, "recovered"),
        (["server_error"] * 3, "retries_exhausted", 3),
        (["rate_limit", "stall", "server_error"], "retries_exhausted", 3),
        (["guardrail"], "guardrail_rejection", 1),
        (["content_filter"], "guardrail_rejection", 1),
        (["context_overflow"], "context_overflow", 1),
    ],
)
def test_each_endpoint_fault_ends_in_the_right_record(tmp_path, schedule, infra, sent):
    cfg_sim = _cfg(tmp_path)
    spec = _specs("benign")[0]
    clean = _one(cfg_sim, _sim(cfg_sim), spec)
    handler = FaultHandler(schedule, _sim(cfg_sim), retry_after_s=0.2, stall_s=1.5)
    with ServerThread(handler, max_requests=100) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        start = time.monotonic()
        rollout = _one(cfg, OpenAIBackend(cfg.executor), spec)
        elapsed = time.monotonic() - start
    assert rollout.outcome.infra_failure == infra
    if infra is None:  # retried and recovered: the very episode the clean endpoint gives
        assert rollout.messages == clean.messages and rollout.outcome == clean.outcome
        assert len(handler.seen) == len(schedule) + clean.outcome.steps
        assert rollout.usage.requests == clean.outcome.steps
    else:
        assert len(handler.seen) == sent
        assert rollout.calls == [] and rollout.outcome.utility is False
    if "rate_limit" in schedule:
        assert elapsed >= 0.2  # Retry-After was honoured
    if "stall" in schedule:
        assert elapsed >= 0.5  # the client gave up at its timeout and retried


@pytest.mark.parametrize("fault", ["malformed_args", "unknown_tool"])
def test_malformed_tool_calls_are_agent_failures_the_model_is_told_about(tmp_path, fault):
    spec = _specs("benign")[0]
    handler = FaultHandler([fault], None)
    with ServerThread(handler, max_requests=20) as srv:
        cfg = _cfg(tmp_path, srv.base_url)
        rollout = _one(cfg, OpenAIBackend(cfg.executor), spec)
    assert rollout.outcome.infra_failure is None
    assert rollout.outcome.utility is False
    bad = rollout.calls[0]
    assert bad.error and ("JSONDecodeError" in bad.error if fault == "malformed_args" else bad.function)
    # the error went back to the model as the tool result, and the episode went on
    tool_msgs = [m for m in handler.seen[1].body["messages"] if m["role"] == "tool"]
    assert tool_msgs and tool_msgs[0]["content"] == bad.error
    assert len(handler.seen) == 2


def test_mixed_faults_lose_and_double_count_nothing(tmp_path):
    cfg_sim = _cfg(tmp_path)
    specs = _specs() + _specs("benign")

    attempts: Counter[str] = Counter()

    def schedule(n: int, body: dict) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "apartment" in user.lower() or "address" in user.lower():
            return "guardrail"  # every episode of one family is rejected
        # Keyed on the request, not on arrival order: with requests in flight concurrently, an arrival
        # pattern can hand one request a fault on every retry. Here each request meets at most one
        # transient fault (a third of them a 429, a third a 500), then succeeds.
        key = json.dumps(body, sort_keys=True)
        attempts[key] += 1
        if attempts[key] > 1:
            return "ok"
        return ["ok", "rate_limit", "server_error"][zlib.crc32(key.encode()) % 3]

    handler = FaultHandler(schedule, _sim(cfg_sim), retry_after_s=0.01)
    with ServerThread(handler, max_requests=2000) as srv:
        cfg = _cfg(tmp_path, srv.base_url, max_retries=4)
        out = tmp_path / "shard.jsonl"
        rollouts = _run(cfg, OpenAIBackend(cfg.executor), specs, out)
    recorded = read_records(out, Rollout)
    ids = [r.rollout_id for r in recorded]
    assert sorted(ids) == sorted(s.rollout_id for s in specs) and len(set(ids)) == len(ids)
    rejected = [r for r in rollouts if r.outcome.infra_failure == "guardrail_rejection"]
    assert {r.family for r in rejected} == {"user_task_13"}
    assert len(rejected) == sum(s.instance.family == "user_task_13" for s in specs)
    assert all(r.outcome.infra_failure is None for r in rollouts if r.family != "user_task_13")
    assert {s.fault for s in handler.seen} >= {"rate_limit", "server_error", "guardrail"}
    # every answered request belongs to exactly one recorded turn
    answered = sum(s.fault == "ok" for s in handler.seen)
    assert answered == sum(r.usage.requests for r in rollouts)


def test_cache_makes_a_rerun_issue_zero_requests_and_no_cache_bypasses_it(tmp_path):
    cfg_sim = _cfg(tmp_path)
    specs = _specs("benign")
    handler = FaultHandler((), _sim(cfg_sim))
    with ServerThread(handler, max_requests=500) as srv:
        cfg = _cfg(tmp_path, srv.base_url, cache=True)
        first = _run(cfg, OpenAIBackend(cfg.executor), specs, tmp_path / "a.jsonl")
        sent = len(handler.seen)
        assert sent == sum(r.usage.requests for r in first) > 0
        again = OpenAIBackend(cfg.executor)
        second = _run(cfg, again, specs, tmp_path / "b.jsonl")
        assert len(handler.seen) == sent, "a rerun from the cache must not reach the endpoint"
        assert again.cache_stats()["hits"] == sent and again.cache_stats()["misses"] == 0
        assert [r.outcome for r in second] == [r.outcome for r in first]
        assert all(r.usage.requests == 0 for r in second)
        assert second[0].executor["source"] == "cache" and second[0].executor["served_models"]
        _run(cfg, OpenAIBackend(cfg.executor, use_cache=False), specs, tmp_path / "c.jsonl")
        assert len(handler.seen) == 2 * sent


def test_cache_key_covers_the_sampling_parameters(tmp_path):
    handler = FaultHandler(())
    request = ChatRequest(messages=tuple(opening_messages("sys", "hello")), seed=1)
    with ServerThread(handler, max_requests=50) as srv:
        for change in ({}, {"temperature": 0.7}, {"max_tokens": 99}, {"extra_body": {"x": 1}}, {}):
            cfg = _cfg(tmp_path, srv.base_url, cache=True, **change)
            asyncio.run(OpenAIBackend(cfg.executor).complete(request))
        asyncio.run(
            OpenAIBackend(_cfg(tmp_path, srv.base_url, cache=True).executor).complete(
                request.model_copy(update={"seed": 2})
            )
        )
    assert len(handler.seen) == 5  # the repeated default request was a hit; every change missed


def test_sampling_reaches_the_server_explicitly(tmp_path):
    handler = FaultHandler(())
    extra = {"chat_template_kwargs": {"enable_thinking": False}}
    request = ChatRequest(messages=tuple(opening_messages("sys", "hello")), seed=42)
    with ServerThread(handler, max_requests=10) as srv:
        cfg = _cfg(tmp_path, srv.base_url, temperature=0.0, max_tokens=77, extra_body=extra)
        asyncio.run(OpenAIBackend(cfg.executor).complete(request))
        cfg = _cfg(tmp_path, srv.base_url, send_seed=False)
        asyncio.run(OpenAIBackend(cfg.executor).complete(request))
    body = handler.seen[0].body
    assert "temperature" in body and body["temperature"] == 0
    assert body["max_tokens"] == 77 and body["seed"] == 42
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "seed" not in handler.seen[1].body


def test_fingerprint_names_the_served_model_and_never_the_key(tmp_path, monkeypatch):
    secret = "sk-test-" + "9" * 24
    monkeypatch.setenv("EVOAUDIT_TEST_KEY", secret)
    cfg_sim = _cfg(tmp_path)
    handler = FaultHandler((), _sim(cfg_sim), model="served-model-7")
    with ServerThread(handler, max_requests=100) as srv:
        cfg = _cfg(tmp_path, srv.base_url, api_key_env="EVOAUDIT_TEST_KEY", cache=True)
        rollout = _one(cfg, OpenAIBackend(cfg.executor), _specs("benign")[0])
    fp = rollout.executor
    assert fp["served_models"] == ["served-model-7"] and fp["base_url"] == srv.base_url
    assert fp["sampling"]["temperature"] == 0.0 and fp["source"] == "live"
    assert secret not in rollout.model_dump_json()
    assert secret not in (tmp_path / "cache.sqlite").read_bytes().decode("latin-1")


def test_one_bounded_concurrency_per_endpoint(tmp_path):
    cfg_sim = _cfg(tmp_path)
    handler = FaultHandler((), _sim(cfg_sim), latency_s=0.02)
    with ServerThread(handler, max_requests=500) as srv:
        cfg = _cfg(tmp_path, srv.base_url, concurrency=3)
        backend = OpenAIBackend(cfg.executor)

        async def many():  # more episodes at once than the endpoint allows in flight
            await asyncio.gather(*(run_one(cfg, backend, s, "sys", None) for s in _specs()))

        asyncio.run(many())
    assert handler.max_inflight == 3


def test_a_request_no_retry_can_fix_stops_the_job(tmp_path, monkeypatch):
    monkeypatch.delenv("EVOAUDIT_MISSING_KEY", raising=False)
    with pytest.raises(EndpointError, match="EVOAUDIT_MISSING_KEY"):
        OpenAIBackend(_cfg(tmp_path, "http://127.0.0.1:9/v1", api_key_env="EVOAUDIT_MISSING_KEY").executor)
    assert classify_status(401, "invalid_api_key", "bad key") == "fatal"
    assert (
        classify_status(400, None, "This model's maximum context length is 8192 tokens") == "context_overflow"
    )
    assert classify_status(503, None, "overloaded") == "retry"
    assert classify_status(400, "content_filter", "blocked") == "guardrail_rejection"
    with pytest.raises(ValueError, match="unknown infrastructure failure kind"):
        InfraFailure("timeout", "not a class of the taxonomy")


def test_cache_file_and_records_are_json_clean(tmp_path):
    handler = FaultHandler(())
    with ServerThread(handler, max_requests=10) as srv:
        cfg = _cfg(tmp_path, srv.base_url, cache=True)
        backend = OpenAIBackend(cfg.executor)
        asyncio.run(backend.complete(ChatRequest(messages=tuple(opening_messages("s", "u")), seed=3)))
    summary = backend.cache.summary()
    assert summary["entries"] == 1 and summary["by_endpoint"][0]["base_url"] == srv.base_url
    json.dumps(summary)


def test_cli_no_cache_switch_and_cache_stats(tmp_path, capsys):
    from evoaudit.cli import main

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(f"executor: {{cache_path: {tmp_path / 'cache.sqlite'}}}\n")
    assert main(["--no-cache", "validate-config", "--config", str(cfg_file)]) == 0
    resolved = json.loads(capsys.readouterr().out)
    assert resolved["executor"]["cache"] is False and resolved["optimizer"]["cache"] is False
    assert main(["validate-config", "--config", str(cfg_file)]) == 0
    assert json.loads(capsys.readouterr().out)["executor"]["cache"] is True
    handler = FaultHandler(())
    with ServerThread(handler, max_requests=10) as srv:
        cfg = _cfg(tmp_path, srv.base_url, cache=True)
        asyncio.run(
            OpenAIBackend(cfg.executor).complete(ChatRequest(messages=tuple(opening_messages("s", "u"))))
        )
    assert main(["cache", "stats", "--config", str(cfg_file)]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 1


def test_retry_after_forms_are_understood():
    from evoaudit.models.openai_backend import retry_after_s

    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "150"}) == 0.15
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert retry_after_s({"retry-after": "soon"}) is None and retry_after_s({}) is None
