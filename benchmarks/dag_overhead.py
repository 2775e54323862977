"""Workflow overhead: the default audit's wall time on 2 cores, and the time of a rerun with nothing to do.

Runs the real Snakemake scheduler on a fresh copy of the workflow and the default config (embedded
simulator, so no endpoint time is involved), then runs it again unchanged: the second run must schedule
no job, and its time is the DAG's own cost (parse, config validation, rerun-trigger checks).
Prints one JSON object as its last line: {"default_audit_s": T, "noop_rerun_s": N, ...}.
Usage: python benchmarks/dag_overhead.py [--cores 2] [--workdir DIR] [--config-override YAML]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _copy(dest: Path, overrides: dict) -> None:
    shutil.copy(REPO / "Snakefile", dest / "Snakefile")
    shutil.copytree(REPO / "workflow", dest / "workflow")
    shutil.copytree(REPO / "scripts", dest / "scripts")  # the rules' `script:` entry points
    (dest / "config").mkdir()
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    base.update(overrides)
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(base, sort_keys=False))


def _run(workdir: Path, cores: int) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--directory", str(workdir)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake failed in {workdir}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--workdir", type=Path, help="keep the run here instead of a temporary directory")
    ap.add_argument("--config-override", default="{}", help="YAML mapping merged over config/config.yaml")
    args = ap.parse_args(argv)
    overrides = yaml.safe_load(args.config_override) or {}
    tmp = None
    if args.workdir is None:
        tmp = tempfile.mkdtemp(prefix="evoaudit-dag-")
        workdir = Path(tmp)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=False)
    try:
        _copy(workdir, overrides)
        load_before = os.getloadavg()[0]
        full_s, _ = _run(workdir, args.cores)
        noop_s, log = _run(workdir, args.cores)
        if "Nothing to be done" not in log:
            raise RuntimeError(f"the rerun scheduled jobs; it should have had nothing to do:\n{log[-3000:]}")
        jobs = sum(1 for _ in (workdir / "results" / "benchmarks").rglob("*.tsv"))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "default_audit_s": round(full_s, 2),
        "noop_rerun_s": round(noop_s, 2),
        "jobs": jobs,
        "cores": args.cores,
        "load_average_before": round(load_before, 2),  # other work on the machine inflates both figures
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
