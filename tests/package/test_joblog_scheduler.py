"""A workflow job dies with its scheduler: after kill -9 of Snakemake no orphaned job publishes an output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from evoaudit.joblog import scheduler_pid

# A job that announces itself (with the pid of a child it started), then publishes after a delay.
JOB = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    {prologue}
    child = subprocess.Popen(["sleep", "60"])
    Path(sys.argv[1]).write_text(f"{{child.pid}}")
    time.sleep(4)
    Path(sys.argv[2]).write_text("published")
    """
)


def _wait_for(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _start_job(tmp_path: Path, prologue: str) -> tuple[subprocess.Popen, int]:
    """A scheduler stand-in that starts JOB and waits (it is the job's parent); the job's child's pid."""
    (tmp_path / "job.py").write_text(JOB.format(prologue=prologue))
    runner = "import subprocess, sys; subprocess.run([sys.executable, *sys.argv[1:]])"
    paths = [str(tmp_path / name) for name in ("job.py", "started", "out")]
    scheduler = subprocess.Popen([sys.executable, "-c", runner, *paths])
    return scheduler, int(_wait_for(tmp_path / "started"))


def test_a_job_and_what_it_started_end_when_its_scheduler_is_killed(tmp_path):
    prologue = "import os; from evoaudit.joblog import watch_scheduler; watch_scheduler(os.getppid())"
    scheduler, grandchild = _start_job(tmp_path, prologue)
    job = psutil.Process(grandchild).parent()
    scheduler.send_signal(signal.SIGKILL)
    scheduler.wait()
    assert _gone(job.pid) and _gone(grandchild)
    time.sleep(4.5)
    assert not (tmp_path / "out").exists()


def test_a_job_without_the_watch_outlives_its_killed_parent_as_the_control(tmp_path):
    scheduler, grandchild = _start_job(tmp_path, "")
    scheduler.send_signal(signal.SIGKILL)
    scheduler.wait()
    assert _wait_for(tmp_path / "out", 10) == "published"  # the orphan the watch prevents
    os.kill(grandchild, signal.SIGKILL)


def test_only_a_snakemake_parent_is_watched():
    assert scheduler_pid() is None  # pytest is not Snakemake: a stage called directly is never watched


def test_kill9_of_snakemake_leaves_no_job_running_and_nothing_published(tmp_path):
    (tmp_path / "Snakefile").write_text(
        "rule slow:\n    output: 'out.txt'\n    log: 'slow.log'\n    script: 'slow.py'\n"
    )
    (tmp_path / "slow.py").write_text(
        textwrap.dedent(
            """
            import subprocess, time
            from pathlib import Path
            from evoaudit.joblog import job_log
            with job_log(snakemake.log[0]):
                child = subprocess.Popen(["sleep", "60"])
                Path("started").write_text(str(child.pid))
                time.sleep(4)
                Path(snakemake.output[0]).write_text("published")
            """
        )
    )
    exe = Path(sys.executable).with_name("snakemake")
    scheduler = subprocess.Popen(
        [str(exe), "--cores", "1", "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    grandchild = int(_wait_for(tmp_path / "started"))
    job = psutil.Process(grandchild).parent()
    assert job.parent().pid == scheduler.pid  # a local job's parent is Snakemake itself
    scheduler.send_signal(signal.SIGKILL)
    scheduler.wait()
    time.sleep(4.5)
    assert not (tmp_path / "out.txt").exists()
    assert _gone(job.pid) and _gone(grandchild)


@pytest.mark.slow  # five Snakemake starts
def test_after_kill9_of_snakemake_the_rerun_redoes_no_finished_job_and_the_cut_one_runs_again(tmp_path):
    (tmp_path / "Snakefile").write_text(
        "rule all:\n    input: 'out.txt'\n"
        "rule fast:\n    output: 'fast.txt'\n    shell: 'echo done > {output}'\n"
        "rule slow:\n    input: 'fast.txt'\n    output: 'out.txt'\n"
        "    log: 'slow.log'\n    script: 'slow.py'\n"
    )
    (tmp_path / "slow.py").write_text(
        textwrap.dedent(
            """
            import time
            from pathlib import Path
            from evoaudit.joblog import job_log
            with job_log(snakemake.log[0]):
                Path("started").write_text("1")
                time.sleep(4)
                Path(snakemake.output[0]).write_text("published")
            """
        )
    )
    exe = str(Path(sys.executable).with_name("snakemake"))
    quiet = {"cwd": tmp_path, "capture_output": True, "text": True}
    scheduler = subprocess.Popen(
        [exe, "--cores", "1"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for(tmp_path / "started")
    finished = (tmp_path / "fast.txt").stat().st_mtime_ns
    scheduler.send_signal(signal.SIGKILL)
    scheduler.wait()
    time.sleep(1)
    locked = subprocess.run([exe, "--cores", "1"], **quiet)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr  # it says how to unlock
    assert subprocess.run([exe, "--unlock"], **quiet).returncode == 0
    plan = subprocess.run([exe, "--cores", "1", "-n"], **quiet)
    jobs = plan.stdout + plan.stderr
    assert "rule slow:" in jobs and "rule fast:" not in jobs, jobs  # the finished job is not redone
    assert subprocess.run([exe, "--cores", "1"], **quiet).returncode == 0
    assert (tmp_path / "out.txt").read_text() == "published"
    assert (tmp_path / "fast.txt").stat().st_mtime_ns == finished
