"""A small audit submitted to a real single-node SLURM cluster through Snakemake's SLURM executor plugin.

The cluster comes from Debian's packages (.ci/slurm/install.sh) and is started by .ci/slurm/start.sh
unless one already answers; the test stops only what it started. It is skipped, with the reason, only
where SLURM cannot start here (not root, packages or plugin missing, a daemon that does not come up).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
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


@pytest.mark.slow
def test_small_audit_runs_to_completion_through_the_slurm_executor(tmp_path, slurm_cluster):
    # Endpoint-calling rules stay on the submitting host (cluster.local_endpoint_rules); the rest is
    # submitted, replay shards grouped into one job.
    root = copy_workflow(
        tmp_path,
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
    log = run.stdout + run.stderr
    assert (root / "results/report/tables/main.csv").exists()
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\w+?)/", log))
    kinds = set(submitted.values())
    assert {"rule_checker_audit", "rule_instances", "rule_report"} <= kinds, log[-3000:]
    assert any(k.startswith("group_replay") for k in kinds), "replay shards should be one grouped job"
    assert not kinds & {"rule_acquire", "rule_evolve", "rule_evaluate"}, (
        f"endpoint rules were submitted: {kinds}"
    )
    # The scheduler's own accounting saw every submitted job complete.
    acct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(submitted)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    states = dict(line.split("|", 1) for line in acct.split())
    assert states and all(s == "COMPLETED" for s in states.values()), states
