"""A small audit submitted to a real single-node SLURM cluster through Snakemake's SLURM executor plugin,
then its evaluations rerun as SLURM jobs that are cancelled and timed out (one workflow copy for both).

The cluster comes from Debian's packages (.ci/slurm/install.sh) and is started by .ci/slurm/start.sh
unless one already answers; the test stops only what it started. It is skipped, with the reason, only
where SLURM cannot start here (not root, packages or plugin missing, a daemon that does not come up).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

START = REPO / ".ci" / "slurm" / "start.sh"
STOP = REPO / ".ci" / "slurm" / "stop.sh"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct")


def _answers() -> bool:
    try:
        ok = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10)
        acct = subprocess.run(["sacct", "-n", "-X", "-S", "now-1minute"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    up = any(state in ok.stdout for state in ("idle", "mixed", "alloc"))
    return ok.returncode == 0 and up and acct.returncode == 0


@pytest.fixture(scope="module")
def slurm_cluster():
    if _answers():
        yield "running"
        return
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        pytest.skip(f"SLURM cannot start: {', '.join(missing)} not installed (run .ci/slurm/install.sh)")
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip(
            "SLURM cannot be used: snakemake-executor-plugin-slurm is not installed (.ci/slurm/install.sh)"
        )
    if os.geteuid() != 0:
        pytest.skip("SLURM cannot start: .ci/slurm/start.sh starts the daemons as root, and this is not root")
    started = subprocess.run(["bash", str(START)], capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        subprocess.run(["bash", str(STOP)], capture_output=True, timeout=120)
        pytest.skip(f"SLURM did not start here: {started.stderr.strip()[-800:]}")
    try:
        yield "started"
    finally:
        subprocess.run(["bash", str(STOP)], capture_output=True, timeout=120)


MAIN = "results/report/tables/main.csv"
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)")


@dataclass
class Audit:
    root: Path
    log: str
    main_csv: bytes


@pytest.fixture(scope="module")
def slurm_audit(tmp_path_factory, slurm_cluster) -> Audit:
    """One small audit run to completion through the SLURM profile; later tests reuse its copy."""
    # Endpoint-calling rules stay on the submitting host (cluster.local_endpoint_rules); the rest is
    # submitted, replay shards grouped into one job.
    root = copy_workflow(
        tmp_path_factory.mktemp("slurm"),
        {
            "lineages": ["L1"],
            "methods": ["static"],
            "conditions": ["static"],
            "suite": {"goals": ["injection_task_0"]},
            "transfer": {"enabled": False},
            "seal": {"verify_sample": 0},
            "cluster": {"local_endpoint_rules": True},
        },
    )
    run = snakemake(root, "--workflow-profile", "workflow/profiles/slurm", "--resources", "api_slots=8")
    return Audit(root, run.stdout + run.stderr, (root / MAIN).read_bytes())


def _sacct_states(job_ids) -> dict[str, str]:
    acct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("|", 1) for line in acct.splitlines() if line)


@pytest.mark.slow
def test_small_audit_runs_to_completion_through_the_slurm_executor(slurm_audit):
    log = slurm_audit.log
    assert (slurm_audit.root / MAIN).exists()
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\w+?)/", log))
    kinds = set(submitted.values())
    assert {"rule_checker_audit", "rule_instances", "rule_report"} <= kinds, log[-3000:]
    assert any(k.startswith("group_replay") for k in kinds), "replay shards should be one grouped job"
    assert not kinds & {"rule_acquire", "rule_evolve", "rule_evaluate"}, (
        f"endpoint rules were submitted: {kinds}"
    )
    # The scheduler's own accounting saw every submitted job complete.
    states = _sacct_states(submitted)
    assert states and all(s == "COMPLETED" for s in states.values()), states


def _serve_sim(root: Path, latency_ms: float, port: int = 0) -> tuple[subprocess.Popen, str]:
    """`evoaudit serve-sim` on 127.0.0.1 (the single node reaches it there), slowed by ``latency_ms``."""
    ready = root / f"serve-sim-{latency_ms:g}.json"
    cmd = [sys.executable, "-m", "evoaudit.cli", "serve-sim", "--port", str(port), "--config",
           "config/config.yaml", "--ready-file", str(ready), "--latency-ms", str(latency_ms)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=root, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().endswith("\n"):
            return proc, json.loads(ready.read_text())["base_url"]
        if proc.poll() is not None:
            raise AssertionError("evoaudit serve-sim exited before it was ready")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("evoaudit serve-sim did not start within 60 s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _squeue_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


#: Bound on the interrupted run: the first benign attempt needs ~2 min at this latency, but SLURM ends it at
#: its 1-minute limit (checked every ~30 s); the rest is a retry cancelled at once and a short attacked job.
INTERRUPTED_RUN_BOUND_S = 300
LATENCY_MS = 1000


@pytest.mark.slow
def test_cancelled_and_timed_out_jobs_end_the_run_and_a_rerun_restores_the_tables(slurm_audit, tmp_path):
    """scancel (`CANCELLED by 0`) and a job over its time limit (TIMEOUT) are failures that the profile's
    retry and --keep-going act on; the run ends by itself, naming each job and its state, and a plain rerun
    (no --unlock) restores the uninterrupted run's tables byte for byte."""
    root = slurm_audit.root
    # Evaluation jobs are now submitted and call a served simulator slowed to ~1 s per request (concurrency
    # 1), so that they are still running when they are cancelled or their limit is cut. Over HTTP the
    # simulator gives the in-process tables (tests/workflow/test_executor_serve_sim_workflow.py).
    server, base_url = _serve_sim(root, LATENCY_MS)
    port = int(base_url.rsplit(":", 1)[1].split("/", 1)[0])
    cfg_path = root / "config" / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["executor"] = cfg.get("executor", {}) | {
        "backend": "openai",
        "base_url": base_url,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "concurrency": 1,
    }
    cfg["cluster"] = {"local_endpoint_rules": False}
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    shutil.rmtree(root / "results" / "evaluate")
    # Only the removed evaluations (and what reads them) rerun, not the stages whose endpoint setting
    # changed above: this compares the same acquisition and seal, evaluated twice.
    args = ["--workflow-profile", "workflow/profiles/slurm", "--resources", "api_slots=8",
            "--rerun-triggers", "mtime"]  # fmt: skip
    log_path = tmp_path / "interrupted.log"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(root), *args, "--keep-going"]
    try:
        with log_path.open("w") as log_file:
            run = subprocess.Popen(cmd, cwd=root, stdout=log_file, stderr=subprocess.STDOUT)
            jobs: dict[str, list[str]] = {"benign": [], "attacked": []}
            done: set[str] = set()
            started = time.monotonic()
            try:
                while run.poll() is None:
                    assert time.monotonic() - started < INTERRUPTED_RUN_BOUND_S, (
                        f"the run did not end by itself within {INTERRUPTED_RUN_BOUND_S} s (jobs {jobs}):\n"
                        + log_path.read_text()[-3000:]
                    )
                    for job_id, path in SUBMITTED.findall(log_path.read_text()):
                        arm = next((a for a in jobs if "rule_evaluate" in path and a in path), None)
                        if arm and job_id not in jobs[arm]:
                            jobs[arm].append(job_id)
                    # attacked: cancel its first attempt (the retry runs to the end);
                    # benign: cut its first attempt's limit to 1 minute (TIMEOUT), then cancel the retry.
                    actions = []
                    if jobs["attacked"]:
                        actions.append((jobs["attacked"][0], ["scancel"]))
                    if jobs["benign"]:
                        actions.append((jobs["benign"][0], ["scontrol", "update", "TimeLimit=1"]))
                    if len(jobs["benign"]) > 1:
                        actions.append((jobs["benign"][1], ["scancel"]))
                    for job_id, action in actions:
                        if job_id not in done and _squeue_state(job_id) == "RUNNING":
                            target = [f"JobId={job_id}"] if action[0] == "scontrol" else [job_id]
                            subprocess.run([*action, *target], check=True, capture_output=True)
                            done.add(job_id)
                    time.sleep(1)
            finally:
                if run.poll() is None:
                    run.kill()
                    ours = [j for ids in jobs.values() for j in ids]
                    if ours:
                        subprocess.run(["scancel", *ours], capture_output=True)
        elapsed = time.monotonic() - started
        log = log_path.read_text()
        assert run.returncode != 0, log[-3000:]
        assert len(jobs["attacked"]) == 2 and len(jobs["benign"]) == 2, (jobs, log[-3000:])
        (a_cancelled, a_retry), (b_timeout, b_cancelled) = jobs["attacked"], jobs["benign"]
        states = _sacct_states([a_cancelled, a_retry, b_timeout, b_cancelled])
        assert states == {
            a_cancelled: "CANCELLED by 0",
            a_retry: "COMPLETED",
            b_timeout: "TIMEOUT",
            b_cancelled: "CANCELLED by 0",
        }, states
        # Each failure is named with its job and state; the last one ends the benign evaluation.
        assert f"SLURM-job '{b_timeout}' failed, SLURM status is: 'TIMEOUT'" in log, log[-3000:]
        for job_id in (a_cancelled, b_cancelled):
            assert f"SLURM job {job_id} ended as 'CANCELLED by 0'" in log, log[-3000:]
            assert f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'" in log, log[-3000:]
        assert (root / "results/evaluate/L1/static/attacked/shard0.jsonl").exists()  # --keep-going
        assert not (root / "results/evaluate/L1/static/benign/shard0.jsonl").exists()
        print(f"interrupted run ended by itself after {elapsed:.0f} s")

        # Resume: the run ended by itself, so no lock is left and a plain rerun finishes the audit.
        _stop(server)
        server, _ = _serve_sim(root, 0, port)
        rerun = snakemake(root, *args, check=False)
        job_logs = "".join(
            f"\n--- {p.relative_to(root)}:\n{p.read_text()[-1500:]}"
            for p in sorted((root / "results/logs/evaluate").rglob("*.log"))
        )
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:] + job_logs
        assert (root / MAIN).read_bytes() == slurm_audit.main_csv
    finally:
        _stop(server)
