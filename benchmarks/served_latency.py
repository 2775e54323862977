"""The Banking audit against a slow endpoint: wall time against the critical-path ideal.

``evoaudit serve-sim --latency-ms L`` (the simulator behind the OpenAI API, every chat completion held
L ms) is started on 127.0.0.1; an overlay points the executor and the optimizer (which also answers the
success judge) at it with ``concurrency`` C, no response cache, APEX-Harm off. The paper-scale Banking
audit (3 lineages x 8 conditions, every goal; ``--scale small``: one lineage, three conditions) runs with
the documented command, ``snakemake --cores N --resources api_slots=S`` (docs/endpoints.md, "A slow
endpoint"). The suite stage runs first (the server's oracle reads its instance table), then the rest; wall
time is the two runs together, the server's start-up left out.

The ideal, from the run's own records (``critical_path``):

- a job's chain is its longest sequence of model requests that each wait for the one before: for an
  episode (acquisition, evaluation, SkillOpt's gate) its recorded ``usage.requests``, for an optimizer
  call its attempts. Per job: ``acquire``/``evaluate``, the longest episode of its shard; ``evolve``,
  per method: ReasoningBank (and any method learning from the judge) one judge round and one distil round,
  each as deep as its most-attempted call (from ``diagnostics.optimizer_answers``: 1, plus the malformed
  answers of that kind, at most ``max_attempts``), SkillOpt the initial gate plus, per update in order, the
  deeper of its reflections, the ranking call if it was made and the candidate's gate (a gate's depth: the
  lineage's longest acquisition episode, since gate episodes are not recorded),
  AWM its induction's attempts; ``verify``, the longest sampled rollout (its shards rerun at once); every
  other rule (the in-process transfer simulator, seal, replay, report) none;
- a job's ideal is chain x latency + its CPU seconds (``cpu_time`` of Snakemake's benchmark file: start-up,
  simulator, tools, bookkeeping), counted as not overlapping its own waiting;
- a stage (rules that wait on one another: suite, acquire, evolve, placebo, freeze, unseal, evaluate and
  transfer, replay and verify, report, index) takes the larger of its longest job and its jobs' CPU seconds
  over the machine's cores; the ideal is the stages' sum. It leaves out what the scheduler, the server and
  the network add, so ratio = wall / ideal >= 1 up to CPU measured high.

On the simulator every figure is a mechanism check of the harness's scheduling, not a model measurement.
The last line printed is one JSON object; ``--out`` also writes it.

Usage: python benchmarks/served_latency.py [--scale paper|small] [--latency-ms 1000] [--concurrency 256]
       [--cores 8] [--api-slots 16384] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

#: Stages in the order they wait on one another; a rule is the first part of its benchmark file's path.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("suite", ("checker_audit", "instances")),
    ("acquire", ("acquire",)),
    ("evolve", ("evolve",)),
    ("placebo", ("placebo",)),
    ("freeze", ("freeze",)),
    ("unseal", ("unseal",)),
    ("evaluate", ("evaluate", "transfer")),
    ("replay+verify", ("replay", "verify")),
    ("report", ("report", "export_inspect")),
    ("index", ("run_index",)),
)

SCALES = {
    "paper": {},
    "small": {"lineages": ["L1"], "conditions": ["static", "skillopt", "reasoningbank"]},
}


@dataclass(frozen=True)
class Job:
    rule: str
    name: str  # the benchmark file's path under results/benchmarks, without .tsv
    wall_s: float
    cpu_s: float
    chain: int  # dependent model requests, in order


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _longest_episode(rollouts: list[dict]) -> int:
    return max((r.get("usage", {}).get("requests", 0) for r in rollouts), default=0)


def _round_depth(meta: dict, kind: str, max_attempts: int) -> int:
    """How deep a round of concurrent calls of ``kind`` went: 1, plus its malformed answers (each a retry
    of some call), at most ``max_attempts``; 0 when none was asked."""
    by_kind = meta.get("diagnostics", {}).get("optimizer_answers", {}).get("by_kind", {}).get(kind)
    if not by_kind or not by_kind.get("answers_asked"):
        return 0
    return min(max_attempts, 1 + by_kind.get("malformed_answers", 0))


def _attempts(call: dict | None) -> int:
    return len(call.get("attempts", [])) if call else 0


def evolve_chain(meta: dict, max_attempts: int, gate_depth: int = 0) -> int:
    """Dependent optimizer and gate requests of one evolve job (see the module's docstring);
    ``gate_depth``: requests of SkillOpt's longest gate episode."""
    d = meta.get("diagnostics", {})
    method = meta.get("method")
    chain = _round_depth(meta, "judge", max_attempts)
    if method == "reasoningbank":
        chain += _round_depth(meta, "distil", max_attempts)
    elif method == "awm":
        chain += _attempts(d.get("induction"))
    elif method == "skillopt":
        chain += gate_depth
        for update in d.get("updates", []):
            chain += max((_attempts(c) for c in update.get("calls", [])), default=0)
            chain += _attempts(update.get("ranking", {}).get("call"))
            chain += gate_depth if "gate_candidate" in update else 0
    return chain


def job_chain(results: Path, rule: str, name: str, max_attempts: int) -> int:
    """The chain of one job, read from what it wrote."""
    parts = name.split("/")
    if rule == "acquire":
        return _longest_episode(_read_jsonl(results / "acquire" / parts[1] / "rollouts.jsonl"))
    if rule == "evaluate":
        return _longest_episode(_read_jsonl(results / (name + ".jsonl")))
    if rule == "evolve":
        meta = json.loads((results / "artifacts" / parts[1] / parts[2] / "meta.json").read_text())
        # Gate episodes are not recorded; the lineage's longest acquisition episode stands for them.
        acquired = _read_jsonl(results / "acquire" / parts[1] / "rollouts.jsonl")
        return evolve_chain(meta, max_attempts, _longest_episode(acquired))
    if rule == "verify":
        report = json.loads((results / "verify" / "verify.json").read_text())
        sampled = set(report.get("rollouts", []))
        shards = (results / "evaluate").rglob("*.jsonl")
        return _longest_episode([r for s in shards for r in _read_jsonl(s) if r["rollout_id"] in sampled])
    return 0


def read_jobs(results: Path, max_attempts: int) -> list[Job]:
    """Every job Snakemake benchmarked, with its wall and CPU seconds and its chain."""
    jobs = []
    for tsv in sorted((results / "benchmarks").rglob("*.tsv")):
        name = tsv.relative_to(results / "benchmarks").with_suffix("").as_posix()
        rows = list(csv.DictReader(tsv.open(encoding="utf-8"), delimiter="\t"))
        if not rows:
            continue
        row = rows[-1]  # a job run again appends a row: the last is this run's
        cpu = float(row["cpu_time"]) if row.get("cpu_time") not in (None, "", "NA", "-") else 0.0
        rule = name.split("/")[0]
        jobs.append(Job(rule, name, float(row["s"]), cpu, job_chain(results, rule, name, max_attempts)))
    return jobs


def critical_path(jobs: list[Job], latency_s: float, cores: int) -> dict:
    """The ideal wall time of ``jobs`` (see the module's docstring), per stage and in total."""
    stage_of = {rule: stage for stage, rules in STAGES for rule in rules}
    order = [stage for stage, _ in STAGES] + ["other"]
    by_stage: dict[str, list[Job]] = {}
    for job in jobs:
        by_stage.setdefault(stage_of.get(job.rule, "other"), []).append(job)
    stages = {}
    for stage in order:
        members = by_stage.get(stage)
        if not members:
            continue
        longest = max(members, key=lambda j: j.chain * latency_s + j.cpu_s)
        cpu = sum(j.cpu_s for j in members)
        stages[stage] = {
            "jobs": len(members),
            "longest_job": longest.name,
            "chain_requests": longest.chain,
            "longest_job_s": round(longest.chain * latency_s + longest.cpu_s, 2),
            "cpu_s": round(cpu, 2),
            "cpu_over_cores_s": round(cpu / cores, 2),
            "ideal_s": round(max(longest.chain * latency_s + longest.cpu_s, cpu / cores), 2),
        }
    return {"stages": stages, "ideal_s": round(sum(s["ideal_s"] for s in stages.values()), 2)}


def _start_server(work: Path, latency_ms: float) -> tuple[subprocess.Popen, str]:
    ready = work / "serve-sim.json"
    cmd = [sys.executable, "-m", "evoaudit.cli", "serve-sim", "--port", "0", "--config", "config/config.yaml"]
    cmd += ["--latency-ms", str(latency_ms), "--ready-file", str(ready)]
    log = (work / "server.log").open("w")
    proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().endswith("\n"):
            return proc, json.loads(ready.read_text())["base_url"]
        if proc.poll() is not None:
            sys.exit(f"evoaudit serve-sim exited before it was ready; see {work / 'server.log'}")
        time.sleep(0.1)
    proc.kill()
    sys.exit("evoaudit serve-sim did not start within 120 s")


def _children_cpu_s() -> float:
    """CPU seconds of every finished child process and its waited descendants (Snakemake and its jobs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _snakemake(work: Path, cores: int, api_slots: int, *targets: str) -> float:
    # Targets first: --resources takes every argument after it.
    cmd = [sys.executable, "-m", "snakemake", *targets, "--cores", str(cores)]
    cmd += ["--resources", f"api_slots={api_slots}"]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    wall = time.time() - t0
    (work / "snakemake.log").open("a").write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"snakemake failed (exit {proc.returncode}); its log: {work / 'snakemake.log'}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="paper")
    ap.add_argument("--latency-ms", type=float, default=1000.0)
    ap.add_argument("--concurrency", type=int, default=256, help="executor's and optimizer's concurrency")
    ap.add_argument("--cores", type=int, default=8, help="snakemake --cores (jobs wait on the network)")
    ap.add_argument("--api-slots", type=int, default=None, help="default: 64 jobs' concurrency")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    api_slots = args.api_slots if args.api_slots is not None else 64 * args.concurrency
    out = args.out or REPO / f"benchmarks/output/served_latency_{args.scale}.json"
    work = Path(tempfile.mkdtemp(prefix="evoaudit-served-latency-"))
    for item in ("Snakefile", "workflow", "scripts"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / item)
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(SCALES[args.scale])
    cfg["apex"] = cfg.get("apex", {}) | {"enabled": False}
    (work / "config").mkdir()
    cfg_path = work / "config/config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    load_before = os.getloadavg()
    cpu_before = _children_cpu_s()
    suite_s = _snakemake(work, args.cores, api_slots, "results/suite/instances.parquet")
    server, base_url = _start_server(work, args.latency_ms)
    try:
        endpoint = {"backend": "openai", "base_url": base_url, "concurrency": args.concurrency}
        endpoint["cache"] = False  # every request goes to the server
        for role in ("executor", "optimizer"):
            cfg[role] = cfg.get(role, {}) | endpoint
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        audit_s = _snakemake(work, args.cores, api_slots)
        run_cpu_s = _children_cpu_s() - cpu_before  # the server is still running: not counted
    finally:
        server.terminate()
        server.wait(timeout=30)
    load_after = os.getloadavg()
    resolved = yaml.safe_load(cfg_path.read_text())
    max_attempts = resolved.get("methods_params", {}).get("max_attempts", 3)
    jobs = read_jobs(work / "results", max_attempts)
    ideal = critical_path(jobs, args.latency_ms / 1000, os.cpu_count() or 1)
    wall = suite_s + audit_s
    result = {
        "notice": "simulator behind serve-sim: a mechanism check of scheduling, not a model measurement",
        "scale": args.scale,
        "command": f"snakemake --cores {args.cores} --resources api_slots={api_slots}",
        "latency_ms": args.latency_ms,
        "concurrency": args.concurrency,
        "cpu_count": os.cpu_count(),
        "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
        "loadavg_1_5_15_after": [round(x, 2) for x in load_after],
        "wall_s": round(wall, 1),
        "suite_stage_s": round(suite_s, 1),
        "ideal_s": ideal["ideal_s"],
        "ratio": round(wall / ideal["ideal_s"], 3) if ideal["ideal_s"] else math.nan,
        # Snakemake and all its jobs (rusage): what the whole run cost the machine's cores, next to the
        # jobs' sampled cpu_time summed in the stages.
        "run_cpu_s": round(run_cpu_s, 1),
        "run_cpu_over_cores_s": round(run_cpu_s / (os.cpu_count() or 1), 1),
        "stages": ideal["stages"],
        "workdir": str(work),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
