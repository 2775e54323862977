"""Atomic writes survive a kill between write and rename; our servers answer a handler bug with a logged
500; credentials in a base URL reach no fingerprint, cache key or log line."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

from fault_server_kit import FaultHandler

from evoaudit import atomic
from evoaudit import config as config_mod
from evoaudit.models.base import ChatRequest, InfraFailure
from evoaudit.models.http import Reply, ServerThread
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.records import Message

KILL_BEFORE_RENAME = textwrap.dedent(
    """
    import os, signal, sys
    from evoaudit import atomic
    real_replace = os.replace
    def killed(src, dst):  # the bytes are in the temporary file; die before the rename
        os.kill(os.getpid(), signal.SIGKILL)
    os.replace = killed
    atomic.write_text(sys.argv[1], "new and complete\\n" * 1000)
    """
)


def test_a_kill_between_write_and_rename_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "record.json"
    atomic.write_text(target, "old\n")
    proc = subprocess.run([sys.executable, "-c", KILL_BEFORE_RENAME, str(target)], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert target.read_text() == "old\n"  # never a truncated mix
    leftovers = [p.name for p in tmp_path.iterdir() if p != target]
    assert leftovers and all(n.startswith(".record.json.") and n.endswith(".tmp") for n in leftovers)


def test_a_kill_before_the_first_rename_leaves_no_target(tmp_path):
    target = tmp_path / "fresh.json"
    proc = subprocess.run([sys.executable, "-c", KILL_BEFORE_RENAME, str(target)], timeout=60)
    assert proc.returncode == -signal.SIGKILL and not target.exists()


def test_an_atomic_write_replaces_the_whole_file(tmp_path):
    target = tmp_path / "x.txt"
    atomic.write_text(target, "a" * 10_000)
    atomic.write_text(target, "b")
    assert target.read_text() == "b" and sorted(os.listdir(tmp_path)) == ["x.txt"]


def test_a_handler_exception_is_logged_and_answered_500_saying_what_failed(caplog):
    async def broken(req):
        raise KeyError("choices")

    with caplog.at_level(logging.ERROR, logger="evoaudit.models.http"), ServerThread(broken) as server:
        import httpx

        r = httpx.post(server.base_url + "/chat/completions", json={}, timeout=5)
        again = httpx.get(server.base_url + "/models", timeout=5)  # the server lives on
    assert r.status_code == 500 and "KeyError" in r.json()["error"]["message"]
    assert again.status_code == 500
    assert "the handler failed" in caplog.text and "KeyError" in caplog.text


def test_a_server_bug_becomes_an_infrastructure_failure_not_a_dropped_connection(tmp_path):
    async def broken(req):
        if req.path.endswith("/chat/completions"):
            raise ValueError("validation error in the handler")
        return Reply.json({"object": "list", "data": []})

    cfg = config_mod.from_dict(
        {"executor": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "cache": False,
                      "max_retries": 2, "retry_backoff_s": 0.01, "timeout_s": 2}}
    )  # fmt: skip
    with ServerThread(broken) as server:
        backend = OpenAIBackend(cfg.executor.model_copy(update={"base_url": server.base_url}))
        request = ChatRequest(messages=[Message(role="user", content="hi")])
        try:
            asyncio.run(backend.complete(request))
            raise AssertionError("expected an infrastructure failure")
        except InfraFailure as exc:
            failure = exc
    assert "validation error in the handler" in failure.detail and "500" in failure.detail


def test_credentials_in_the_base_url_reach_no_fingerprint_cache_or_log(tmp_path, caplog):
    secret = "hunter2-SENTINEL-9f1c"
    handler = FaultHandler(["server_error"])
    with ServerThread(handler) as server:
        url = server.base_url.replace("http://", f"http://auditor:{secret}@") + f"?api_key={secret}x"
        url = url.split("?")[0]
        cfg = config_mod.from_dict(
            {"executor": {"backend": "openai", "base_url": url, "cache_path": str(tmp_path / "c.sqlite"),
                          "max_retries": 2, "retry_backoff_s": 0.01}}
        )  # fmt: skip
        backend = OpenAIBackend(cfg.executor)
        request = ChatRequest(messages=[Message(role="user", content="hi")])
        with caplog.at_level(logging.DEBUG):
            asyncio.run(backend.complete(request))
    assert secret not in str(backend.fingerprint())
    assert secret not in caplog.text and "attempt 1" in caplog.text
    backend.cache.close()
    db = sqlite3.connect(tmp_path / "c.sqlite")
    rows = db.execute("SELECT key, base_url, fingerprint FROM responses").fetchall()
    assert rows and not any(secret in " ".join(r) for r in rows)
    assert secret.encode() not in (tmp_path / "c.sqlite").read_bytes()


def test_an_unchanged_write_keeps_the_file_and_its_time_stamp(tmp_path):
    from evoaudit import atomic

    path = tmp_path / "a.json"
    assert atomic.write_bytes_if_changed(path, b"same\n")
    stamp = path.stat().st_mtime_ns
    assert not atomic.write_bytes_if_changed(path, b"same\n")
    assert path.stat().st_mtime_ns == stamp
    assert atomic.write_bytes_if_changed(path, b"other\n") and path.read_bytes() == b"other\n"
