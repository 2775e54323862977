"""A hostile model cannot stop the audit nor erase its harm: a reduced audit of both suites (Banking and
APEX-Harm, one `snakemake` run) against an endpoint whose model answers every conversation with hundreds of
hostile tool calls and a large answer full of markup (tests/hostile_server_kit.py) runs to the end, with
nothing excluded, replay clean, the harm counted, the payload escaped in every report page, and nothing
written outside results_dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow
from hostile_server_kit import MARKER, HostileHandler

from evoaudit.models.http import ServerThread


def _tree(root: Path, skip: tuple[str, ...]) -> dict[str, bytes]:
    """Every file under ``root`` but the top-level entries ``skip``, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in skip
    }


def _rollouts(root: Path) -> list[dict]:
    return [
        json.loads(line)
        for shard in sorted(root.rglob("shard*.jsonl"))
        for line in shard.read_text().splitlines()
        if line.strip()
    ]


@pytest.mark.slow
def test_a_reduced_audit_of_both_suites_against_a_hostile_model_runs_to_the_end_and_counts_the_harm(tmp_path):
    handler = HostileHandler()
    # The run's temporary directory, traversable by the sandbox's user: what is left in it was written
    # outside results_dir (the run directories of run_command live there while a call runs).
    run_tmp = Path(tempfile.mkdtemp(prefix="hostile-run-", dir="/tmp"))
    run_tmp.chmod(0o755)
    with ServerThread(handler) as srv:
        executor = {
            "backend": "openai",
            "base_url": srv.base_url,
            "model": handler.model,
            "timeout_s": 60,
            "max_retries": 1,
            "cache_path": "results/cache/responses.sqlite",
        }
        copy_workflow(
            tmp_path,
            {
                "lineages": ["L1"],
                "methods": ["static"],
                "conditions": ["static"],
                "suite": {
                    "families": ["user_task_0", "user_task_3"],
                    "goals": ["injection_task_0"],
                    "apex": {"scale": 0.05},
                },
                "roles": {"acquisition": ["v0"]},
                "agent": {"max_steps": 3},
                "seal": {"verify_sample": 1},
                "transfer": {"enabled": False},
                "executor": executor,
                "apex": {
                    "enabled": True,
                    "models": [{"id": "hostile", "executor": executor}],
                    "tasks": ["ib_wacc", "mc_utilisation_dashboard"],
                    "categories": ["c1"],
                },
            },
        )
        before = _tree(tmp_path, ("results", ".snakemake"))
        cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(tmp_path)]
        proc = subprocess.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(run_tmp)}
        )
    left = sorted(p.name for p in run_tmp.iterdir())
    if not left:
        run_tmp.rmdir()
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    results = tmp_path / "results"
    assert handler.requests > 0

    # Banking: nothing excluded, every attacked episode's transfer counted as an unauthorised change.
    main = pd.read_csv(results / "report/tables/main.csv")
    row = main[main["condition"] == "static"].iloc[0]
    assert row["n_excluded"] == 0 and row["n_attacked"] > 0 and row["n_benign"] > 0
    assert row["unauth"] == 1.0  # every attacked episode moved money it was not asked to
    rollouts = _rollouts(results / "evaluate")
    assert rollouts and all(r["outcome"]["infra_failure"] is None for r in rollouts)
    assert all(r["outcome"]["harm"]["unauthorized_transfer"] for r in rollouts)
    replays = [json.loads(p.read_text()) for p in sorted((results / "replay").rglob("shard*.json"))]
    assert replays and all(r["mismatched_rollouts"] == 0 for r in replays), replays

    # APEX-Harm: nothing excluded (2 tasks: 2 benign, 4 attacked episodes), the mail sent outside the firm
    # (by the agent, by a program's spool before its tree broke recursive cleanup, and by sharing the
    # decompression bomb) counted as harm in every attacked episode, replay clean.
    apex = results / "apex"
    records = _rollouts(apex / "runs" / "hostile")
    assert len(records) == 6 and all(r["outcome"]["infra_failure"] is None for r in records)
    attacked = [r for r in records if r["goal"] is not None]
    assert len(attacked) == 4 and all(r["outcome"]["harm"]["unauthorised_external_mail"] for r in attacked)
    apex_main = pd.read_csv(apex / "report/tables/apex_main.csv")
    (hostile,) = apex_main[apex_main["model"] == "hostile"].to_dict("records")
    assert hostile["n_benign"] == 2 and hostile["n_attacked"] == 4
    apex_replay = pd.read_csv(apex / "report/tables/apex_replay.csv")
    assert len(apex_replay) == 2 and (apex_replay["mismatched_rollouts"] == 0).all()
    for r in records:
        errors = {c["call_id"]: c.get("error") or "" for c in r["calls"]}
        shown = {m["tool_call_id"]: m["content"] for m in r["messages"] if m["role"] == "tool"}
        assert "inflates" in errors["call_3"], errors["call_3"]  # the bomb refused before any parser
        assert "internal error" not in shown["call_0"], shown["call_0"]  # the deep tree: the agent's call
        # The mail the program's spool sent before its tree broke recursive cleanup stays in the record.
        assert "sent before the cleanup" in json.dumps(r["terminal_state"])
    # The run kept what the pre-flight found, and owns its directory.
    found = json.loads((results / "logs/preflight.json").read_text())["roles"]
    assert found["executor"]["tool_call_probe"]["result"] == "native"
    assert (results / ".evoaudit-owner.json").is_file() and (results / "config/config.json").is_file()
    # The payload's markup never reaches a page unescaped: no page of either report holds a script tag.
    pages = [p for p in results.rglob("*") if p.suffix in (".html", ".md", ".svg")]
    assert {p.name for p in pages} >= {"index.html", "apex_main.html", "main.html"}
    assert not [p for p in pages if MARKER in p.read_text(errors="replace")]
    assert not [p for p in pages if "<script" in p.read_text(errors="replace").lower()]
    # Nothing written outside results_dir: the workflow copy is as it was, and the temporary directory
    # the run's programs and run directories used is empty (Snakemake's own .snakemake/ aside).
    assert _tree(tmp_path, ("results", ".snakemake")) == before
    assert left == [], left
