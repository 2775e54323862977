"""Secrets stay out: an audit run with a sentinel API key, or with sentinel credentials in its base_url,
leaves no trace of them in any file it writes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, snakemake, write_config
from sentinel_kit import KEY_ENV, SENTINEL, files_containing

from evoaudit import config as config_mod
from evoaudit.models.openai_backend import OpenAIBackend

URL_USER, URL_PASSWORD = "user-SENTINEL-51c2", "pw-SENTINEL-e09a7d3b"


def test_the_scan_finds_a_planted_key(tmp_path):
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "x.bin").write_bytes(b"\x00prefix" + SENTINEL.encode("utf-16-le"))
    (tmp_path / "clean.txt").write_text("nothing here")
    assert files_containing(tmp_path, SENTINEL) == [tmp_path / "deep" / "er" / "x.bin"]


def test_the_openai_backend_needs_the_named_variable(monkeypatch):
    # The key is really in play: without the variable the backend refuses to start.
    cfg = config_mod.from_dict(
        {"executor": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV}}
    )
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(Exception, match=KEY_ENV):
        OpenAIBackend(cfg.executor)
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    OpenAIBackend(cfg.executor)


def _start_server(workdir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    ready = workdir / "ready.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "evoaudit.cli", "serve-sim", "--config", "config/config.yaml", "--port", "0",
         "--instances", "results/suite/instances.parquet", "--manifest", "results/freeze/manifest.json",
         "--results", "results", "--ready-file", str(ready)],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not ready.exists() and time.monotonic() < deadline and server.poll() is None:
        time.sleep(0.2)
    if not ready.exists():
        server.kill()
        raise AssertionError(f"serve-sim did not start: {server.stderr.read().decode()[-2000:]}")
    return server, json.loads(ready.read_text())["base_url"]


@pytest.mark.slow
def test_an_audit_over_http_with_a_sentinel_key_writes_it_nowhere(tmp_path, monkeypatch):
    small = {
        "lineages": ["L1"],
        "methods": ["static"],
        "conditions": ["static"],
        "suite": {"goals": ["injection_task_0"]},
        "seal": {"verify_sample": 2, "replay_on_mismatch": "record"},
    }
    endpoint = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV}
    # No server yet: the suite stage needs none, so the pre-flight is off for this first call only.
    copy_workflow(tmp_path, small | {"executor": endpoint | {"wire": {"preflight": False}}})
    monkeypatch.setenv(KEY_ENV, SENTINEL)  # inherited by Snakemake, its jobs and the server
    snakemake(tmp_path, "results/suite/instances.parquet")
    server, base_url = _start_server(tmp_path, dict(os.environ))
    try:
        write_config(tmp_path, small | {"executor": endpoint | {"base_url": base_url}})
        snakemake(tmp_path)
    finally:
        server.terminate()
        server.wait(timeout=20)
    cfg = yaml.safe_load((tmp_path / "config/config.yaml").read_text())
    assert cfg["executor"]["api_key_env"] == KEY_ENV
    shard = tmp_path / "results/evaluate/L1/static/benign/shard0.jsonl"
    rollout = json.loads(shard.read_text().splitlines()[0])
    assert rollout["executor"]["backend"] == "openai"  # the audit really went over HTTP
    for where in ("results", "results/logs", ".snakemake"):
        assert (tmp_path / where).is_dir()
    assert files_containing(tmp_path, SENTINEL) == []


class _BasicAuthOnly:
    """The simulator behind HTTP basic auth: a request without the sentinel credentials gets a 401, so
    an audit that completes really sent them."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.expected = "Basic " + base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode()
        self.accepted, self.refused = 0, []

    async def __call__(self, req):
        from evoaudit.models.http import Reply

        if req.headers.get("authorization") != self.expected:
            self.refused.append(req.path)
            return Reply.error(401, "basic auth required", "invalid_api_key")
        self.accepted += 1
        return await self.inner(req)


@pytest.mark.slow
def test_an_audit_with_credentials_in_its_base_url_writes_them_nowhere(tmp_path):
    from evoaudit.models.http import ServerThread
    from evoaudit.ops.sim_oracle import make_handler

    small = {
        "lineages": ["L1"],
        "methods": ["static"],
        "conditions": ["static"],
        "suite": {"goals": ["injection_task_0"]},
        "seal": {"verify_sample": 2, "replay_on_mismatch": "record"},
    }
    port_url = "http://{creds}127.0.0.1:{port}/v1"
    endpoint = {"backend": "openai", "base_url": port_url.format(creds=f"{URL_USER}:{URL_PASSWORD}@", port=9)}
    # The transfer check calls the endpoint too, under its derived configuration (results/transfer/).
    transfer = {"conditions": ["static"], "goals": ["injection_task_0"]}
    copy_workflow(
        tmp_path, small | {"executor": endpoint | {"wire": {"preflight": False}}, "transfer": transfer}
    )
    snakemake(tmp_path, "results/suite/instances.parquet")
    cfg = config_mod.load(tmp_path / "config" / "config.yaml")
    results = tmp_path / "results"
    handler = _BasicAuthOnly(
        make_handler(cfg, results / "suite/instances.parquet", results / "freeze/manifest.json", results)
    )
    with ServerThread(handler) as server:
        url = port_url.format(creds=f"{URL_USER}:{URL_PASSWORD}@", port=server.server.port)
        endpoint = {"backend": "openai", "base_url": url}
        write_config(tmp_path, small | {"executor": endpoint, "transfer": transfer | {"executor": endpoint}})
        proc = snakemake(tmp_path)
    assert handler.accepted > 0 and handler.refused == []  # the credentials really went as basic auth
    shards = ("evaluate/L1/static/benign/shard0.jsonl", "transfer/evaluate/L1/static/attacked/shard0.jsonl")
    for shard in shards:
        rollout = json.loads((results / shard).read_text().splitlines()[0])
        assert rollout["executor"]["backend"] == "openai" and rollout.get("infra_failure") is None, shard
    resolved = json.loads((results / "config/config.json").read_text())
    assert resolved["executor"]["base_url"] == port_url.format(creds="REDACTED@", port=server.server.port)
    assert URL_PASSWORD in (tmp_path / "config/config.yaml").read_text()  # the only copy, the user's own
    for where in ("results", "results/logs", ".snakemake"):
        assert (tmp_path / where).is_dir()
    for secret in (URL_PASSWORD, URL_USER):
        assert secret not in proc.stdout + proc.stderr
        assert files_containing(tmp_path / "results", secret) == []
        assert files_containing(tmp_path / ".snakemake", secret) == []
