"""The default audit run against ``evoaudit serve-sim`` over HTTP gives the in-process simulator's tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, snakemake

MAIN = "results/report/tables/main.csv"
# One lineage and the static condition keep the run short; every stage still runs its executor.
SMALL = {"lineages": ["L1"], "methods": ["static"], "conditions": ["static"]}


def _start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    ready = workdir / "serve-sim.json"
    cmd = [
        sys.executable,
        "-m",
        "evoaudit.cli",
        "serve-sim",
        "--port",
        "0",
        "--config",
        "config/config.yaml",
        "--ready-file",
        str(ready),
    ]
    proc = subprocess.Popen(
        cmd, cwd=workdir, stderr=subprocess.DEVNULL, env=os.environ | {"PYTHONUNBUFFERED": "1"}
    )
    for _ in range(600):
        if ready.exists() and ready.read_text().endswith("\n"):
            return proc, json.loads(ready.read_text())["base_url"]
        if proc.poll() is not None:
            raise AssertionError("evoaudit serve-sim exited before it was ready")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("evoaudit serve-sim did not start within 30 s")


@pytest.mark.slow
def test_default_audit_over_http_matches_the_in_process_simulator(tmp_path):
    (tmp_path / "local").mkdir()
    (tmp_path / "remote").mkdir()
    local = copy_workflow(tmp_path / "local", SMALL)
    snakemake(local)

    remote = copy_workflow(tmp_path / "remote", SMALL)
    snakemake(remote, "results/suite/instances.parquet")  # the server's oracle reads this table
    server, base_url = _start_server(remote)
    try:
        cfg_path = remote / "config" / "config.yaml"
        cfg = yaml.safe_load(cfg_path.read_text())
        cfg["executor"] = cfg.get("executor", {}) | {
            "backend": "openai",
            "base_url": base_url,
            "cache_path": str(tmp_path / "cache.sqlite"),
            "concurrency": 16,
        }
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        snakemake(remote)
    finally:
        server.terminate()
        server.wait(timeout=10)

    assert (remote / MAIN).read_bytes() == (local / MAIN).read_bytes()
    shard = next((remote / "results" / "evaluate").rglob("*.jsonl"))
    first = json.loads(shard.read_text().splitlines()[0])
    assert first["executor"]["backend"] == "openai" and first["executor"]["base_url"] == base_url
    assert "evoaudit-sim" in first["executor"]["served_models"]
