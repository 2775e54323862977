"""A real-model audit, measured: ``config/examples/local-qwen.yaml`` (a documented fraction of the default
audit: one lineage, three Banking families, one goal, four conditions; APEX-Harm on two tasks with category
1), optionally with overlays such as ``local-qwen-small.yaml``, run by Snakemake against
Qwen2.5-Coder-0.5B-Instruct on llama.cpp's ``llama-server --jinja``, started here on 127.0.0.1 with
``--parallel SLOTS`` and ``--metrics``.

What it reports, and where each figure comes from:

- wall time of the whole run, and each stage's window (first job start to last job end, from Snakemake's
  own log);
- requests: the chat completions the run's jobs were answered (their logs' HTTP lines, retries included;
  an attempt that timed out has no such line);
- tokens: prompt tokens the server processed (its prompt cache excluded) and tokens generated, the
  server's own counters (``/metrics``);
- the server's busy share: ``/slots`` sampled every ``--sample-s`` seconds, each sample weighted by the
  time to the next; busy = at least one slot processing; slot use = processing slots / SLOTS; both overall
  and inside the evaluation stage's window; samples the server did not answer within 5 s are counted;
- the harness's share of wall time: the share of samples in which no slot was processing (the server
  waited on Snakemake, job start-up, tool execution, replay or the report).

The last line printed is one JSON object; ``--out`` also writes it. A 0.5B model on CPU says nothing
about capable models: the figures are the loop's cost and the server's use on this machine.

Usage: python benchmarks/real_model.py [--slots 2] [--threads 2] [--api-slots 4] [--sample-s 0.5] [--out FILE]
       [--overlay config/examples/local-qwen-small.yaml]   (the shape CI runs)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import yaml
from snakemake.utils import update_config

from evoaudit.ops import compat

REPO = Path(__file__).resolve().parents[1]
ALIAS = "qwen2.5-coder-0.5b-instruct"
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def stage_windows(log: str) -> dict[str, dict[str, float]]:
    """Per rule: first start and last end (epoch seconds) and job count, from Snakemake's printed log."""
    stamp, pending, starts = None, None, {}
    out: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        if m := _STAMP.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := _START.match(line):
            pending = m.group(1)
        elif (m := _JOBID.match(line)) and pending and stamp is not None:
            starts[m.group(1)] = (pending, stamp)
            pending = None
        elif (m := _END.match(line)) and stamp is not None and m.group(1) in starts:
            rule, began = starts.pop(m.group(1))
            w = out.setdefault(rule, {"start": began, "end": stamp, "jobs": 0})
            w["start"], w["end"], w["jobs"] = min(w["start"], began), max(w["end"], stamp), w["jobs"] + 1
    return out


def wait_loaded(base: str, timeout_s: float = 300.0) -> None:
    """llama-server lists its model while still loading and answers 503 meanwhile: wait for /health."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"llama-server at {base} did not finish loading within {timeout_s:.0f} s")
        time.sleep(1)


def metrics(base: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines() if ln and not ln.startswith("#")}


class SlotSampler(threading.Thread):
    def __init__(self, base: str, every_s: float) -> None:
        super().__init__(daemon=True)
        self.base, self.every_s, self.samples, self.failed = base, every_s, [], 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            asked = time.time()  # stamped when asked: a busy server answers /slots later
            try:
                with urllib.request.urlopen(f"{self.base}/slots", timeout=5) as r:
                    slots = json.load(r)
                self.samples.append((asked, sum(bool(s.get("is_processing")) for s in slots)))
            except OSError:
                self.failed += 1
            self.done.wait(self.every_s)


def busy(samples: list[tuple[float, int]], slots: int, lo: float = 0.0, hi: float = float("inf")) -> dict:
    """Time-weighted: each sample stands for the time until the next one."""
    inside = [(t, n) for t, n in samples if lo <= t <= hi]
    spans = [(b[0] - a[0], a[1]) for a, b in zip(inside, inside[1:], strict=False)]
    total = sum(dt for dt, _ in spans)
    if total <= 0:
        return {"samples": len(inside), "busy_share": None, "slot_use": None}
    return {
        "samples": len(inside),
        "busy_share": round(sum(dt for dt, n in spans if n > 0) / total, 3),
        "slot_use": round(sum(dt * n for dt, n in spans) / (total * slots), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=2, help="llama-server --parallel (= every concurrency)")
    ap.add_argument("--threads", type=int, default=2, help="llama-server --threads")
    ap.add_argument(
        "--api-slots",
        type=int,
        default=None,
        help="snakemake --resources api_slots (default: twice --slots; the server queues the rest)",
    )
    ap.add_argument("--sample-s", type=float, default=0.5, help="seconds between /slots samples")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/output/real_model.json")
    ap.add_argument(
        "--overlay",
        type=Path,
        action="append",
        default=[],
        help="a config overlay merged over the example as Snakemake merges --configfile (repeatable), "
        "e.g. config/examples/local-qwen-small.yaml",
    )
    args = ap.parse_args()
    api_slots = args.api_slots or 2 * args.slots
    model, binary = compat.qwen_model(), compat.llama_server_binary()
    if model is None or binary is None:
        sys.exit("needs the model (bash .ci/install-qwen.sh) and llama-server (.ci/install-llama-server.sh)")
    work = Path(tempfile.mkdtemp(prefix="evoaudit-real-model-"))
    port = compat.free_port()
    argv = [str(binary), "--model", str(model), "--alias", ALIAS, "--jinja", "--metrics", "--no-webui"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--parallel", str(args.slots)]
    argv += ["--threads", str(args.threads), "--ctx-size", str(8192 * args.slots)]
    for item in ("Snakefile", "workflow", "scripts"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / item)
    cfg = yaml.safe_load((REPO / "config/examples/local-qwen.yaml").read_text())
    for overlay in args.overlay:
        update_config(cfg, yaml.safe_load(overlay.read_text()))
    cfg.pop("results_dir")
    for block in cfg["endpoints"].values():
        block.update(base_url=f"http://127.0.0.1:{port}/v1", concurrency=args.slots)
    (work / "config").mkdir()
    (work / "config/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    with compat.process_server(argv, port, work / "server.log") as base:
        root = base.removesuffix("/v1")
        wait_loaded(root)
        before = metrics(root)
        sampler = SlotSampler(root, args.sample_s)
        sampler.start()
        t0 = time.time()
        cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", f"api_slots={api_slots}"]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        wall = time.time() - t0
        sampler.done.set()
        sampler.join()
        after = metrics(root)
    (work / "snakemake.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"snakemake failed (exit {proc.returncode}); its log: {work / 'snakemake.log'}")
    windows = stage_windows(proc.stdout + proc.stderr)
    # One line per chat completion answered (the HTTP client logs it when the response arrives): an attempt
    # that timed out or was refused is not one.
    answered = re.compile(r"HTTP Request: POST \S+/chat/completions ")
    requests = sum(
        len(answered.findall(p.read_text(errors="replace"))) for p in (work / "results/logs").rglob("*.log")
    )

    def delta(key: str) -> float:
        return round(after.get(f"llamacpp:{key}", 0.0) - before.get(f"llamacpp:{key}", 0.0), 1)

    ev = windows.get("evaluate")
    result = {
        "model": f"{ALIAS} (Q4_K_M GGUF) on llama-server, {args.slots} slots, {args.threads} threads, CPU",
        "api_slots": api_slots,
        "shape": " + ".join(["config/examples/local-qwen.yaml", *(str(o) for o in args.overlay)]),
        "wall_s": round(wall, 1),
        "stages": {
            rule: {"jobs": w["jobs"], "window_s": round(w["end"] - w["start"], 1)}
            for rule, w in sorted(windows.items(), key=lambda kv: kv[1]["start"])
        },
        "requests": requests,
        "prompt_tokens": delta("prompt_tokens_total"),
        "predicted_tokens": delta("tokens_predicted_total"),
        "prompt_seconds": delta("prompt_seconds_total"),
        "predicted_seconds": delta("tokens_predicted_seconds_total"),
        "server_overall": busy(sampler.samples, args.slots),
        "server_during_evaluate": busy(sampler.samples, args.slots, ev["start"], ev["end"]) if ev else None,
    }
    overall = result["server_overall"]["busy_share"]
    result["harness_share"] = None if overall is None else round(1 - overall, 3)
    result["slot_samples_failed"] = sampler.failed  # /slots unanswered within 5 s (mostly busy moments)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
