"""The fault suite: each transport and answer fault of a loopback endpoint, through the openai backend's
HTTP path (the openai client's httpx client, one pool or several), ends classified right, with every
POST the server received being an attempt the backend counted (none silently repeated), and no rollout
lost or recorded twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fault_server_kit import FaultHandler

from evoaudit import config as config_mod
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.jsonl import read_records
from evoaudit.models.base import ChatRequest, InfraFailure
from evoaudit.models.http import Reply, Request, ServerThread
from evoaudit.models.http_client import make_http_client
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.records import Message, Rollout
from evoaudit.suite.agentdojo.banking.instances import official_instances

# The client with one httpx pool, and the same sharded (more than POOL_SHARD connections).
TRANSPORTS = ("httpx", "httpx-sharded")
GOALS = ["injection_task_0"]


def _cfg(tmp_path: Path, base_url: str, transport: str, **executor) -> config_mod.Config:
    ep = {
        "backend": "openai",
        "base_url": base_url,
        "timeout_s": 0.6,
        "max_retries": 2,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.3,
        "cache": False,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "concurrency": 64 if transport == "httpx-sharded" else 4,
    }
    raw = {"executor": ep | executor, "suite": {"goals": GOALS}, "agent": {"max_steps": 8}}
    return config_mod.from_dict(raw)


def _request(n: int = 0) -> ChatRequest:
    messages = [Message(role="system", content="s"), Message(role="user", content=f"task {n}")]
    return ChatRequest(messages=messages)


async def _ask(backend: OpenAIBackend, n: int, idle_s: float = 0.0) -> list:
    out = []
    for i in range(n):  # one after another, so a pooled connection is reused when it can be
        await asyncio.sleep(idle_s)
        try:
            out.append(await backend.complete(_request(i)))
        except InfraFailure as exc:
            out.append(exc)
    return out


# fault -> (attempts the first request takes, what it ends in)
EXPECTED = {
    "close_after": (1, "ok"),  # the closed pooled connection is not reused: no error, no retry
    "oversized_headers": (1, "ok"),  # a 96 KiB head is read whole (over 1 MiB: a protocol error)
    "no_content": (2, "ok"),  # an empty answer is not a completion, retried
    "informational": (1, "ok"),  # the 100 head is skipped
    "mid_body_disconnect": (2, "ok"),
    "slow_loris": (2, "ok"),  # the whole-answer deadline cuts it, retried
    "rate_limit": (2, "ok"),  # 429 Retry-After honoured, retried
    "server_error": (2, "ok"),
    "guardrail": (1, "guardrail_rejection"),  # an answer about the request: not retried
    "malformed_args": (1, "ok"),  # a model output, recorded as the agent's failed call, not infra
}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_is_classified_and_no_post_is_silently_repeated(tmp_path, transport, fault):
    handler = FaultHandler([fault], retry_after_s=0.05, drip_s=0.05)
    with ServerThread(handler) as server:
        backend = OpenAIBackend(_cfg(tmp_path, server.base_url, transport).executor)
        # After close_after the connection sits idle long enough for the server's close to land.
        first, second = asyncio.run(_ask(backend, 2, idle_s=0.2 if fault == "close_after" else 0.0))
    attempts, ends_in = EXPECTED[fault]
    if ends_in == "ok":
        assert not isinstance(first, InfraFailure), first
    else:
        assert isinstance(first, InfraFailure) and first.kind == ends_in
    assert not isinstance(second, InfraFailure)
    # Every chat POST the server received is one the backend counted: nothing resent behind its back.
    assert len(handler.seen) == backend.attempts == attempts + 1
    assert backend.retries == attempts - 1
    if fault == "malformed_args":
        with pytest.raises(json.JSONDecodeError):
            json.loads(first.message.tool_calls[0].arguments)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_server_that_closes_idle_connections_costs_no_error(tmp_path, transport):
    handler = FaultHandler(["close_after"] * 6)
    with ServerThread(handler) as server:
        backend = OpenAIBackend(_cfg(tmp_path, server.base_url, transport).executor)
        results = asyncio.run(_ask(backend, 8, idle_s=0.2))  # the server closes them while idle
    assert not [r for r in results if isinstance(r, InfraFailure)]
    assert backend.retries == 0 and len(handler.seen) == backend.attempts == 8


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_expired_keep_alive_connections_are_not_reused(tmp_path, transport):
    opened: list[int] = []

    async def count_connections(req):
        return Reply.json({"object": "list", "data": []})

    handler = FaultHandler()
    with ServerThread(handler) as server:
        cfg = _cfg(tmp_path, server.base_url, transport, keepalive_expiry_s=0.05)
        backend = OpenAIBackend(cfg.executor)

        async def go():
            await backend.complete(_request(0))
            await asyncio.sleep(0.2)  # past the expiry
            await backend.complete(_request(1))

        asyncio.run(go())
        opened.append(len(server.server._writers))
    assert backend.retries == 0 and len(handler.seen) == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_run_through_faults_loses_no_rollout_and_records_none_twice(tmp_path, transport):
    cycle = ["ok", "close_after", "mid_body_disconnect", "ok", "server_error", "no_content", "rate_limit"]
    instances = official_instances(("user_task_0", "user_task_3", "user_task_13"))
    cfg0 = _cfg(tmp_path, "http://127.0.0.1:9/v1", transport)
    sim = SimBackend(Oracle.from_instances(instances, GOALS), cfg0.sim)
    first_tries: set[str] = set()

    def schedule(n: int, body: dict) -> str:  # a fault on a request's first try only: each one recovers
        key = json.dumps(body, sort_keys=True)
        if key in first_tries:
            return "ok"
        first_tries.add(key)
        return cycle[n % len(cycle)]

    handler = FaultHandler(schedule, responder=sim, retry_after_s=0.02)
    specs = plan_episodes("L1", "static", "attacked", instances, GOALS) + plan_episodes(
        "L1", "static", "benign", instances, []
    )
    out = tmp_path / "shard0.jsonl"
    with ServerThread(handler) as server:
        cfg = _cfg(tmp_path, server.base_url, transport, max_retries=4, timeout_s=5)  # no stalls here
        backend = OpenAIBackend(cfg.executor)
        asyncio.run(run_specs(cfg, backend, specs, "You are a banking agent.", None, out))
    ids = [json.loads(line)["rollout_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(s.rollout_id for s in specs) and len(set(ids)) == len(ids)
    assert all(r.outcome.infra_failure is None for r in read_records(out, Rollout))
    # Never more POSTs at the server than attempts the backend counted. Fewer is possible: a request sent
    # on a connection the server closed that same instant never reaches the handler (a counted retry).
    assert len(handler.seen) <= backend.attempts
    assert sum(f.fault != "ok" for f in handler.seen) > 0


def test_the_default_client_sizes_its_pool_from_concurrency(tmp_path):
    cfg = _cfg(tmp_path, "https://api.example.org/v1", "httpx", concurrency=20, keepalive_expiry_s=7)
    pool = make_http_client(cfg.executor)._transport._pool
    assert pool._max_connections == 20 and pool._max_keepalive_connections == 20
    assert pool._keepalive_expiry == 7
    # Past POOL_SHARD connections, several httpx pools share the limit.
    cfg = _cfg(tmp_path, "https://api.example.org/v1", "httpx", concurrency=100, keepalive_expiry_s=7)
    pools = [t._pool for t in make_http_client(cfg.executor)._transport._pools]
    assert len(pools) == 4 and sum(p._max_connections for p in pools) == 100
    assert all(p._keepalive_expiry == 7 for p in pools)


@pytest.mark.parametrize("concurrency", [4, 64])  # one httpx pool, and a sharded one
def test_the_default_client_goes_through_the_proxy_the_environment_names(tmp_path, monkeypatch, concurrency):
    targets: list[str] = []
    answer = FaultHandler()

    async def proxy(req):  # a forward proxy sees the absolute URL as the request target
        targets.append(req.path)
        if req.path.endswith("/chat/completions"):
            return await answer(Request(req.method, "/v1/chat/completions", req.headers, req.body))
        return Reply.json({"object": "list", "data": []})

    with ServerThread(proxy) as server:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server.port}")
        for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        cfg = _cfg(tmp_path, "http://audit-endpoint.invalid/v1", "httpx", concurrency=concurrency)
        backend = OpenAIBackend(cfg.executor)
        (reply,) = asyncio.run(_ask(backend, 1))
    assert not isinstance(reply, InfraFailure), reply
    assert "http://audit-endpoint.invalid/v1/chat/completions" in targets
