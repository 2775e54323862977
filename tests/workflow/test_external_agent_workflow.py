"""``agent.external`` through the whole workflow: the template agent (examples/own-agent/openai_agent.py,
an OpenAI-compatible loop over MCP) runs every episode against the simulator served over HTTP, and the
audit completes with the seal and replay unchanged, giving the same tables as evoaudit's own loop."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake
from test_executor_serve_sim_workflow import _start_server

AGENT = REPO / "examples" / "own-agent" / "openai_agent.py"
MAIN = "results/report/tables/main.csv"
# One lineage, the static condition and four families (one unseen) keep the run short.
SMALL = {
    "lineages": ["L1"],
    "methods": ["static"],
    "conditions": ["static"],
    "transfer": {"enabled": False},
    "suite": {
        "families": ["user_task_0", "user_task_3", "user_task_7", "user_task_13"],
        "goals": ["injection_task_1", "injection_task_7"],
    },
    "methods_params": {"placebo": {"goals": ["injection_task_7"]}},
}


@pytest.mark.slow  # about 6 minutes on 2 shared cores (two audit runs)
def test_the_template_agent_on_the_served_simulator_gives_the_own_loops_tables_with_replay_clean(tmp_path):
    (tmp_path / "own").mkdir()
    (tmp_path / "external").mkdir()
    own = copy_workflow(tmp_path / "own", SMALL)
    snakemake(own)

    ext = copy_workflow(tmp_path / "external", SMALL)
    snakemake(ext, "results/suite/instances.parquet")  # the simulator's oracle reads this table
    server, base_url = _start_server(ext)
    try:
        cfg_path = ext / "config" / "config.yaml"
        cfg = yaml.safe_load(cfg_path.read_text())
        model = json.loads((ext / "serve-sim.json").read_text())["model"]
        command = [sys.executable, str(AGENT), "--base-url", base_url, "--model", model, "--max-steps", "12"]
        cfg["agent"] = {**(cfg.get("agent") or {}), "external": {"command": command, "timeout_s": 120}}
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        snakemake(ext)
    finally:
        server.terminate()
        server.wait(timeout=10)

    shard = ext / "results" / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    rollouts = [json.loads(line) for line in shard.read_text().splitlines()]
    assert rollouts and all(r["outcome"]["infra_failure"] is None for r in rollouts)
    # The agent made the model requests, not evoaudit's loop (which counts its own in usage).
    assert all(r["usage"]["requests"] == 0 for r in rollouts)
    own_shard = own / "results" / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    assert all(json.loads(line)["usage"]["requests"] > 0 for line in own_shard.read_text().splitlines())
    # The seal and replay are unchanged: every shard replayed without a mismatch.
    reports = sorted((ext / "results" / "replay").rglob("shard*.json"))
    assert reports and all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)
    assert (ext / MAIN).read_bytes() == (own / MAIN).read_bytes()
