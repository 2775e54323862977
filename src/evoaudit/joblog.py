"""One workflow job's log: logging, stdout, stderr and a failure's message all go to the rule's log file.

The stage scripts in ``scripts/`` run every stage inside ``job_log(snakemake.log[0])``, so a job's log
reads as the ``evoaudit -v`` command's output did: INFO lines, then the error that stopped it.

A job started by a local Snakemake also dies with it (``watch_scheduler``): after ``kill -9`` of the
scheduler no orphaned job goes on to publish its outputs behind the rerun's back. A job whose parent is
not Snakemake (a cluster's job step, a test calling a stage directly) is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from evoaudit.config import ConfigError
from evoaudit.errors import AuditError

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# How often a job checks that its scheduler still runs: the longest an orphan lives after a kill -9.
SCHEDULER_POLL_S = 0.2


def scheduler_pid() -> int | None:
    """The parent's pid when the parent is a Snakemake process (a local job), else None."""
    ppid = os.getppid()
    try:
        cmdline = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    argv = [a.decode(errors="replace") for a in cmdline[:3]]
    names = [Path(a).name for a in argv]
    # `snakemake ...`, `python .../snakemake ...` or `python -m snakemake ...`; never a mere argument.
    started = names[:1] == ["snakemake"] or (
        names[0].startswith("python") and (names[1:2] == ["snakemake"] or argv[1:3] == ["-m", "snakemake"])
    )
    return ppid if started else None


def _end_orphan() -> None:
    # The scheduler is gone: end every process this job started (sandboxes, servers), then the job itself,
    # without running its cleanup, which could publish a half-done output.
    import psutil  # Snakemake's own dependency; imported only here

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    os.kill(os.getpid(), signal.SIGKILL)


def watch_scheduler(pid: int | None, poll_s: float = SCHEDULER_POLL_S) -> threading.Thread | None:
    """Kill this job (and what it started) once process ``pid`` is no longer its parent; None: no watch.

    A parent's death re-parents the job, so ``os.getppid`` changing is the signal (no pid reuse race)."""
    if pid is None:
        return None
    if os.getppid() != pid:  # the scheduler died before the watch started
        _end_orphan()

    def watch() -> None:
        while os.getppid() == pid:
            threading.Event().wait(poll_s)
        _end_orphan()

    thread = threading.Thread(target=watch, name="evoaudit-scheduler-watch", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def job_log(path: str | Path) -> Iterator[None]:
    """Send everything the job writes to ``path``; an exception is written there too, then re-raised. Under
    a local Snakemake the job also dies with the scheduler (``watch_scheduler``)."""
    watch_scheduler(scheduler_pid())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    with open(path, "w", encoding="utf-8", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter(FORMAT))
        previous = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                yield
        except (AuditError, ConfigError) as exc:
            # The same line the CLI prints, so a failed job's log names the rule that stopped it.
            fh.write(f"evoaudit: {type(exc).__name__}: {exc}\n")
            raise
        except Exception:
            logging.getLogger("evoaudit").exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
            root.setLevel(previous)
