"""Parity with AgentDojo's own runner on a real model (issue #29, item 4).

llama.cpp's llama-server serves Qwen2.5-Coder-0.5B-Instruct with one slot, temperature 0 (``--temp 0``:
AgentDojo's client leaves a zero temperature out, so the server's default decides), seed 0 and generation
bounded by ``-n`` (no request field: AgentDojo sends no max_tokens). On a handful of Banking (user task,
injection task) pairs, AgentDojo's own benchmark function (``run_task_with_injection_tasks``, its pipeline
from ``AgentPipeline.from_config``, the ``important_instructions`` attack) and evoaudit's static condition
under ``agent.profile: agentdojo`` (the runner's ``run_one`` on AgentDojo's own user task, whose official
predicate is AgentDojo's utility and whose attack success is its security) must give the same utility and
security per pair, from the same request bodies (call ids aside: llama-server draws them at random and the
template does not render them). Before each side of each pair the server's slot is restored to one saved
state (``slot_snapshot``): a prompt computed from another cached prefix comes out different in the last bits,
which was enough to change the greedy answer of this model.

Two chat templates, the same for both runners:

- the GGUF's own (``--jinja``): the model writes its calls as JSON in the answer's text, which
  llama-server's parser for that template (it asks for ``<tool_call>`` tags) leaves as text, so neither
  runner sees a call and each episode is one request;
- ``tests/data/chatml-json-calls.jinja``, which writes calls as the bare JSON the model answers in, so
  llama-server's parser returns them as native ``tool_calls`` and the episodes run tool rounds.

Install the server with ``bash .ci/install-llama-server.sh`` and the model with ``bash .ci/install-qwen.sh``;
each missing piece skips, saying why. ``EVOAUDIT_PARITY_THREADS`` sets the server's threads (default 2),
``EVOAUDIT_PARITY_PORT`` its port (default: a free one).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from agentdojo_parity_kit import MODEL, compare_pair, logging_proxy, slot_snapshot, wait_healthy

from evoaudit.ops import compat
from evoaudit.replay.recompute import replay_rollout
from evoaudit.suite.registry import get_suite

TEMPLATE = Path(__file__).resolve().parents[2] / "data" / "chatml-json-calls.jinja"
MAX_STEPS = 3  # model turns; AgentDojo's tool loop gets max_steps - 1 iterations
PAIRS = {
    "gguf-template": [
        ("user_task_0", "injection_task_0"),
        ("user_task_3", "injection_task_4"),
        ("user_task_12", "injection_task_3"),
    ],
    # Pairs whose episodes stay clear of llama-server's HTTP 500 for an answer its parser cannot read (a
    # call cut off at the token limit), which AgentDojo's client asks nine times before its benchmark stops.
    "json-calls-template": [
        ("user_task_2", "injection_task_1"),
        ("user_task_11", "injection_task_2"),
        ("user_task_14", "injection_task_7"),
    ],
}


def qwen_model() -> Path | None:
    root = os.environ.get("EVOAUDIT_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    )
    path = Path(root) / ("" if os.environ.get("EVOAUDIT_CACHE") else "evoaudit") / "models"
    found = path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    return found if found.is_file() else None


@pytest.fixture(scope="module", params=sorted(PAIRS))
def qwen_server(request, tmp_path_factory):
    binary = compat.llama_server_binary()
    if binary is None:
        pytest.skip("llama-server is not installed (bash .ci/install-llama-server.sh builds it)")
    model = qwen_model()
    if model is None:
        pytest.skip("the Qwen2.5-Coder-0.5B-Instruct GGUF is not installed (bash .ci/install-qwen.sh)")
    port = int(os.environ.get("EVOAUDIT_PARITY_PORT") or compat.free_port())
    threads = os.environ.get("EVOAUDIT_PARITY_THREADS", "2")
    argv = [str(binary), "--model", str(model), "--alias", MODEL, "--jinja", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--parallel", "1", "--ctx-size", "8192", "--seed", "0", "--temp", "0"]
    slots = tmp_path_factory.mktemp(f"{request.param}-slots")
    argv += ["--n-predict", "192", "--threads", threads, "--no-webui"]
    # No host-memory prompt cache: the slot's own cache is what slot_snapshot saves and restores.
    argv += ["--cache-ram", "0", "--slot-save-path", str(slots)]
    if request.param == "json-calls-template":
        argv += ["--chat-template-file", str(TEMPLATE)]
    log = tmp_path_factory.mktemp(request.param) / "server.log"
    try:
        with compat.process_server(argv, port, log) as base:
            wait_healthy(base)
            yield request.param, base, slot_snapshot(base)
    except compat.Unavailable as exc:
        pytest.fail(f"llama-server did not start: {exc}")


@pytest.mark.slow
def test_agentdojo_runner_and_the_agentdojo_profile_agree_per_pair(qwen_server, record_property):
    variant, upstream, reset = qwen_server
    start = time.monotonic()
    with logging_proxy(upstream) as (base, proxy):
        runs = [compare_pair(base, proxy, u, g, MAX_STEPS, reset, random_ids=True) for u, g in PAIRS[variant]]
    seconds = round(time.monotonic() - start, 1)
    summary = [
        {
            "pair": r["pair"],
            "agentdojo": r["agentdojo"],
            "evoaudit": r["evoaudit"],
            "calls": r["calls"],
        }
        for r in runs
    ]
    print(f"\nparity on {variant} ({seconds} s):\n" + "\n".join(json.dumps(s) for s in summary))
    record_property("parity_seconds", seconds)
    record_property("parity_results", json.dumps(summary))
    for r in runs:
        a, e = r["agentdojo"], r["evoaudit"]
        assert r["body_diffs"] == [], r  # turn by turn, as far as both went
        if "raised" in a:
            # A server error AgentDojo's benchmark does not absorb stops it (no verdict); evoaudit records
            # the episode as an infrastructure failure, kept out of the denominators.
            assert "infra_failure" in e, r
            continue
        assert "infra_failure" not in e, r
        assert (a["utility"], a["security"]) == (e["utility"], e["security"]), r
        assert a["requests"] == e["requests"], r
    # Independent replay reads every profile rollout, re-executing its calls as the profile does.
    for r in runs:
        rollout = r["rollout"]
        instance = get_suite("banking").official_instances([rollout.family])[0]
        assert replay_rollout(rollout, instance).mismatches == {}, r["pair"]
    if variant == "json-calls-template":
        # The template that lets llama-server read the model's calls: tool rounds were run.
        assert any(r["calls"] for r in runs), summary
    else:
        # The GGUF's own template: the calls stay text, one request per episode on either side.
        assert all(r["agentdojo"]["requests"] == 1 and not r["calls"] for r in runs), summary
