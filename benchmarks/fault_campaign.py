"""Faults measured, not assumed: a reduced audit run N times under endpoint faults and a SIGKILL.

One uninterrupted, fault-free run (the simulator served over loopback HTTP) gives the reference tables.
Then, N times (seeded): a fresh copy of the workflow runs against a fault server (the same simulator,
with a share ``--fault-rate`` of chat completions answered by a transient fault: HTTP 500, 429 with
Retry-After, a body cut off mid-way, a connection closed after the answer, a 204), the whole Snakemake
process tree is killed with SIGKILL at a random moment, the directory is unlocked, and the same command
is rerun to completion. Each run's report tables (csv, parquet) are compared byte for byte with the
reference (their provenance.json is not: see ``tables``), and its
evaluation shards with the reference's rollout ids (lost, or recorded twice). The last line printed is
one JSON object:

    {"runs": N, "kills": K, "faults_injected": F, "rollouts_redone": R, "rollouts_lost": L,
     "rollouts_duplicated": D, "tables_identical": I, ...}

Usage: python benchmarks/fault_campaign.py [--runs 20] [--seed 0] [--fault-rate 0.05]
       [--kill-after 5 60] [--keep DIR]
Numbers from the simulator are checks of the machinery, not findings about models.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SMALL = {
    "lineages": ["L1"],
    "methods": ["static"],
    "conditions": ["static"],
    "transfer": {"conditions": ["static"]},
    "suite": {"goals": ["injection_task_0"]},
    "seal": {"verify_sample": 2, "replay_on_mismatch": "record"},
}
TRANSIENT = ("server_error", "rate_limit", "mid_body_disconnect", "close_after", "no_content")


def _config(base_url: str) -> dict:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    executor = {**base.get("executor", {}), "backend": "openai", "base_url": base_url, "max_retries": 6}
    executor |= {"retry_backoff_s": 0.05, "retry_backoff_max_s": 1.0, "timeout_s": 30}
    return base | SMALL | {"executor": executor}


def copy_workflow(dest: Path, base_url: str, preflight: bool = True) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Snakefile", dest / "Snakefile")
    shutil.copytree(REPO / "workflow", dest / "workflow")
    if (REPO / "scripts").is_dir():
        shutil.copytree(REPO / "scripts", dest / "scripts")
    (dest / "config").mkdir(exist_ok=True)
    cfg = _config(base_url)
    if not preflight:  # building the suite before the endpoint exists
        cfg["executor"]["wire"] = {**cfg["executor"].get("wire", {}), "preflight": False}
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


def snakemake_cmd(workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(workdir), *args]


def run(workdir: Path, *args: str) -> None:
    proc = subprocess.run(snakemake_cmd(workdir, *args), cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed in {workdir}:\n{proc.stderr[-3000:]}")


class Faulty:
    """Wraps the simulator's handler: a seeded share of chat completions gets a transient fault."""

    def __init__(self, inner, rate: float, seed: int) -> None:
        self.inner, self.rate, self.rng = inner, rate, random.Random(seed)
        self.injected = 0
        self.lock = threading.Lock()

    async def __call__(self, req):
        from evoaudit.models.http import Reply

        good = await self.inner(req)
        if not req.path.rstrip("/").endswith("/chat/completions") or good.status != 200:
            return good
        with self.lock:
            if self.rng.random() >= self.rate:
                return good
            fault = self.rng.choice(TRANSIENT)
            self.injected += 1
            n = self.injected
        if fault == "server_error":
            return Reply.error(500, f"injected transient fault {n}")
        if fault == "rate_limit":
            return Reply.error(429, "injected rate limit", "rate_limit_exceeded", **{"retry-after": "0.05"})
        if fault == "mid_body_disconnect":
            data = good.encode()
            return Reply(raw=data[: len(data) - len(good.body) // 2], close=True)
        if fault == "close_after":
            return Reply(good.status, good.body, good.headers, close=True)
        return Reply(204, b"", {"content-length": "0"})


def serve(handler, port: int = 0):
    from evoaudit.models.http import ServerThread

    return ServerThread(handler, port).start()


def sim_handler(workdir: Path):
    from evoaudit import config as config_mod
    from evoaudit.ops.sim_oracle import make_handler

    cfg = config_mod.load(workdir / "config" / "config.yaml")
    results = workdir / "results"
    return make_handler(cfg, results / "suite/instances.parquet", results / "freeze/manifest.json", results)


def shard_ids(workdir: Path) -> list[str]:
    ids = []
    for path in sorted((workdir / "results" / "evaluate").rglob("shard*.jsonl")):
        if path.name.endswith((".stale.jsonl", ".infra.jsonl")):
            continue
        ids += [json.loads(line)["rollout_id"] for line in path.read_text().splitlines() if line.strip()]
    return ids


def moved_aside(workdir: Path) -> int:
    results = workdir / "results"
    files = list(results.rglob("*.stale.jsonl")) + list(results.rglob("*.infra.jsonl"))
    return sum(len(p.read_text().splitlines()) for p in files)


def tables(workdir: Path) -> dict[str, bytes]:
    """The report's tables (csv and parquet). Their provenance.json is left out: it names the freeze
    manifest root, which hashes the acquisition rollouts with their wall-clock times (``wall_s``), so it
    differs between any two runs, interrupted or not."""
    root = workdir / "results" / "report" / "tables"
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "provenance.json"
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fault-rate", type=float, default=0.05, help="share of chat completions faulted")
    ap.add_argument("--kill-after", type=float, nargs=2, default=[5.0, 60.0], metavar=("MIN_S", "MAX_S"))
    ap.add_argument("--keep", help="keep the run directories here (default: a temporary directory)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    root = Path(args.keep or tempfile.mkdtemp(prefix="fault_campaign_"))
    root.mkdir(parents=True, exist_ok=True)

    # The reference: no fault, no kill. The suite is built first; the simulator serves from its tables.
    ref = copy_workflow(root / "reference", "http://127.0.0.1:9/v1", preflight=False)
    t0 = time.monotonic()
    run(ref, "results/suite/instances.parquet")
    ref_server = serve(sim_handler(ref))
    copy_workflow_config = _config(ref_server.base_url)
    (ref / "config" / "config.yaml").write_text(yaml.safe_dump(copy_workflow_config, sort_keys=False))
    run(ref)
    ref_s = time.monotonic() - t0
    port = ref_server.server.port
    ref_server.stop()
    expected, ref_tables = sorted(shard_ids(ref)), tables(ref)
    print(f"reference: {len(expected)} rollouts, {len(ref_tables)} tables, {ref_s:.0f} s", file=sys.stderr)

    faulty = Faulty(sim_handler(ref), args.fault_rate, args.seed)
    # Same port as the reference: the base URL is part of the recorded config and fingerprints.
    server = serve(faulty, port)
    kills = redone = lost = duplicated = identical = 0
    per_run = []
    try:
        for i in range(args.runs):
            work = copy_workflow(root / f"run{i:03d}", server.base_url)
            kill_at = rng.uniform(*args.kill_after)
            proc = subprocess.Popen(
                snakemake_cmd(work), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            try:
                proc.wait(timeout=kill_at)
                killed = False
            except subprocess.TimeoutExpired:
                killed = True
            finally:  # also when this script is interrupted: no run outlives it
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)  # the whole tree: Snakemake and every job it started
                    proc.wait()
            kills += killed
            run(work, "--unlock")  # a SIGKILLed Snakemake leaves its lock behind
            run(work, "--rerun-incomplete")  # as the default profile sets; explicit for any cwd
            ids = shard_ids(work)
            run_lost = len(set(expected) - set(ids))
            run_dup = len(ids) - len(set(ids))
            same = tables(work) == ref_tables
            moved = moved_aside(work)
            redone += moved
            lost += run_lost
            duplicated += run_dup
            identical += same
            per_run.append({"run": i, "killed_at_s": round(kill_at, 1), "killed": killed,
                            "moved_aside": moved, "lost": run_lost, "duplicated": run_dup,
                            "tables_identical": same})  # fmt: skip
            print(json.dumps(per_run[-1]), file=sys.stderr)
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "runs": args.runs,
                "kills": kills,
                "faults_injected": faulty.injected,
                "fault_rate": args.fault_rate,
                "rollouts_per_run": len(expected),
                "rollouts_redone": redone,
                "rollouts_lost": lost,
                "rollouts_duplicated": duplicated,
                "tables_identical": identical,
                "reference_s": round(ref_s, 1),
                "seed": args.seed,
            }
        )
    )
    return 0 if lost == 0 and duplicated == 0 and identical == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
