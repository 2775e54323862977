"""The real-endpoint path: every method evolves unchanged against ``evoaudit serve-sim`` over HTTP and
produces byte-identical state to the in-process simulator."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.hashing import sha256_file
from evoaudit.methods.evolve import evolve
from evoaudit.models.factory import make_backend
from evoaudit.records import AcquisitionRecord
from evoaudit.suite.agentdojo.banking.instances import build_instances

FAMILIES = {"user_task_0", "user_task_1", "user_task_3", "user_task_4", "user_task_5", "user_task_8"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("http")
    cfg = config_mod.from_dict({"lineages": ["L1"]})
    instances = [i for i in build_instances(cfg) if i.family in FAMILIES]
    table = root / "instances.parquet"
    # The suite stage's tables and spec: evolution learns only from the table the spec commits.
    write_suite_spec(root / "suite_spec.json", instances, cfg.roles.endpoint_variants, table)
    # An acquisition record made with the in-process simulator, as the acquire stage makes it.
    learning = [i for i in instances if i.variant in cfg.roles.acquisition]
    rollouts, record = root / "rollouts.jsonl", root / "record.json"
    specs = plan_episodes("L1", "acquire", "benign", learning, [])
    backend = make_backend(cfg, cfg.executor, instances)
    asyncio.run(run_specs(cfg, backend, specs, system_prompt(cfg.agent.system_prompt), None, rollouts))
    AcquisitionRecord(
        lineage="L1",
        path=rollouts.as_posix(),
        sha256=sha256_file(rollouts),
        rollouts=0,
        successes=0,
        infra_failures=0,
        executor={},
    ).write(record)

    (root / "config.yaml").write_text(yaml.safe_dump({"lineages": ["L1"]}))
    ready = root / "ready.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "evoaudit.cli", "serve-sim", "--config", str(root / "config.yaml"),
         "--port", "0", "--instances", str(table), "--manifest", str(root / "none.json"),
         "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and server.poll() is None:
        time.sleep(0.1)
    if not ready.exists():
        server.kill()
        raise AssertionError(
            f"serve-sim did not start: {server.stderr.read().decode()[-2000:] if server.stderr else ''}"
        )
    base_url = json.loads(ready.read_text())["base_url"]
    yield root, table, rollouts, record, base_url
    server.terminate()
    server.wait(timeout=10)


def _endpoint(base_url: str, cache: Path) -> dict:
    return {"backend": "openai", "base_url": base_url, "cache": False, "cache_path": str(cache)}


@pytest.mark.parametrize(
    ("method", "state"),
    [("skillopt", "best_skill.md"), ("awm", "workflow.md"), ("reasoningbank", "bank.json")],
)
def test_method_over_http_matches_the_in_process_simulator(setup, method, state):
    root, table, rollouts, record, base_url = setup
    local = config_mod.from_dict({"lineages": ["L1"]})
    remote = config_mod.from_dict(
        {
            "lineages": ["L1"],
            "executor": _endpoint(base_url, root / "exec.sqlite"),
            "optimizer": _endpoint(base_url, root / "opt.sqlite") | {"temperature": 1.0},
        }
    )
    evolve(local, "L1", method, rollouts, record, root / "local" / method, table=table)
    evolve(remote, "L1", method, rollouts, record, root / "remote" / method, table=table)
    a = (root / "local" / method / state).read_text()
    b = (root / "remote" / method / state).read_text()
    assert a and a == b
    meta = json.loads((root / "remote" / method / "meta.json").read_text())
    assert meta["diagnostics"]["optimizer"]["backend"] == "openai"
    assert "api_key" not in json.dumps(meta).lower()
    # The optimizer's answers are counted alike in process and over HTTP.
    here = json.loads((root / "local" / method / "meta.json").read_text())["diagnostics"]["optimizer_answers"]
    assert meta["diagnostics"]["optimizer_answers"] == here and here["answers_asked"] > 0
