"""Progress across jobs, read from their logs: `evoaudit progress [--follow]`.

Each rollout job logs lines like ``<shard>: 40/144 rollouts, 3.2/s, ETA 33s, infrastructure failures 0``
(evaluate.runner.Progress). This module finds the latest such line in every job log under
``results/logs`` and sums them, so one command shows a whole run, whichever executor runs the jobs
(local or SLURM: the logs are on the shared file system). In a terminal it draws a progress bar.
`python -m evoaudit.ops.progress` takes the same options.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from evoaudit.paths import Layout

LINE = re.compile(
    r"(?P<label>\S+): (?P<done>\d+)/(?P<total>\d+) rollouts, (?P<rate>[\d.]+|inf|nan)/s, "
    r"ETA (?P<eta>[\d.]+|inf|nan)s, infrastructure failures (?P<failures>\d+)"
)
#: Bytes read from the end of each log: the latest progress line is always near the end.
TAIL_BYTES = 16384


@dataclass(frozen=True)
class JobProgress:
    log: str
    label: str
    done: int
    total: int
    rate: float
    eta_s: float
    failures: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total


def parse_line(line: str) -> dict | None:
    m = LINE.search(line)
    if m is None:
        return None
    return {
        "label": m["label"],
        "done": int(m["done"]),
        "total": int(m["total"]),
        "rate": float(m["rate"]),
        "eta_s": float(m["eta"]),
        "failures": int(m["failures"]),
    }


def latest(log: Path) -> JobProgress | None:
    with open(log, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(size - TAIL_BYTES, 0))
        tail = fh.read().decode("utf-8", errors="replace")
    for line in reversed(tail.splitlines()):
        parsed = parse_line(line)
        if parsed is not None:
            return JobProgress(log=str(log), **parsed)
    return None


def collect(results: str | Path = "results") -> list[JobProgress]:
    logs = Path(Layout.at(results).logs_dir())
    found = (latest(p) for p in sorted(logs.rglob("*.log"))) if logs.is_dir() else ()
    return [j for j in found if j is not None]


def summary(jobs: list[JobProgress]) -> dict:
    running = [j for j in jobs if not j.finished]
    rate = sum(j.rate for j in running)
    left = sum(j.total - j.done for j in running)
    return {
        "jobs": len(jobs),
        "running": len(running),
        "done": sum(j.done for j in jobs),
        "total": sum(j.total for j in jobs),
        "rate": round(rate, 3),
        "eta_s": round(max((j.eta_s for j in running), default=0.0), 1),
        "left_in_running_jobs": left,
        "failures": sum(j.failures for j in jobs),
    }


def render(s: dict, width: int = 30) -> str:
    frac = s["done"] / s["total"] if s["total"] else 0.0
    bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
    return (
        f"[{bar}] {s['done']}/{s['total']} rollouts in {s['jobs']} jobs ({s['running']} running), "
        f"{s['rate']:.1f}/s, ETA {s['eta_s']:.0f}s, infrastructure failures {s['failures']}"
    )


def watch(
    results: str | Path, follow: bool, every_s: float = 2.0, out: TextIO | None = None, max_updates: int = 0
) -> dict:
    """Print the summary once, or (``follow``) redraw it until no job is left running (to ``out``, by
    default the standard output at call time)."""
    out = sys.stdout if out is None else out
    interactive = out.isatty()
    updates = 0
    while True:
        s = summary(collect(results))
        line = render(s)
        out.write(("\r" + line + "\033[K") if interactive and follow else line + "\n")
        out.flush()
        updates += 1
        if not follow or (s["jobs"] and not s["running"]) or (max_updates and updates >= max_updates):
            if interactive and follow:
                out.write("\n")
            return s
        time.sleep(every_s)


def report_locations(
    results: str | Path = "results", apex: bool = True, ablations: tuple[str, ...] = ()
) -> list[str]:
    """The reports a finished run has written, of: the run's index, the audit's HTML index and report.md,
    and when ``apex``, the APEX-Harm report's index and each ablation's table."""
    from evoaudit.report.run_index import RUN_INDEX, report_paths

    root = Path(results)
    candidates = [root / RUN_INDEX] + [root / rel for rel, _ in report_paths(apex, ablations)]
    return [p.as_posix() for p in candidates if p.exists()]


def success_message(
    results: str | Path = "results", apex: bool = True, ablations: tuple[str, ...] = ()
) -> str:
    """What the workflow prints when it succeeds: where to read the results."""
    found = report_locations(results, apex, ablations)
    root = Path(results).as_posix()
    if found:
        lines = ["evoaudit: the run finished; the reports are:", *(f"  {p}" for p in found)]
    else:
        lines = [f"evoaudit: the run finished; no report under {root}/ yet (the targets built none)"]
    report = shlex.quote(Layout.at(root).report("report.html"))
    lines.append(f"  Snakemake's own HTML report of the run: snakemake --report {report}")
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `evoaudit progress` and `python -m evoaudit.ops.progress`."""
    ap.add_argument("--results", default="results", help="results directory of the run (its logs/ is read)")
    ap.add_argument("--follow", action="store_true", help="redraw every few seconds until no job is running")
    ap.add_argument("--every", type=float, default=2.0, help="seconds between redraws with --follow")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evoaudit.ops.progress", description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    watch(args.results, args.follow, args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
