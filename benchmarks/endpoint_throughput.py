"""Throughput of full agent rollouts through the ``openai`` backend against a loopback endpoint.

A separate process serves the simulator over HTTP with a fixed added latency per chat completion (the
stand-in for model time); this process runs complete episodes (AgentDojo environment, tool execution,
the agent loop, the openai client) at concurrency C. With latency L, an endpoint that is never the
bottleneck and a client that keeps up would serve C / L requests per second; ``ratio_to_ideal`` is the
measured rate over that. The last line printed is one JSON object:

    {"latency_ms": 50, "results": [{"concurrency": C, "requests_per_s": R, "ratio_to_ideal": ...}, ...]}

Usage: python benchmarks/endpoint_throughput.py [--latency-ms 50] [--concurrency 1 8 32 64] [--seconds 4]
       [--realistic]   (realistic: 1 s per completion at concurrency 256)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOALS = [f"injection_task_{i}" for i in range(9)]


def _config(base_url: str | None, concurrency: int):
    from evoaudit import config as config_mod

    executor = {"backend": "sim"}
    if base_url:
        executor = {
            "backend": "openai",
            "base_url": base_url,
            "concurrency": concurrency,
            "cache": False,
            "timeout_s": 30,
        }
    return config_mod.from_dict({"suite": {"goals": GOALS}, "executor": executor})


def serve(port: int, latency_ms: float, ready_file: Path) -> None:
    """The endpoint process: the simulator with the suite's own tasks as its oracle."""
    from evoaudit.models.sim.server import SimHandler
    from evoaudit.models.sim.server import serve as serve_forever
    from evoaudit.models.sim.tools import Oracle, SimBackend
    from evoaudit.suite.agentdojo.banking.instances import official_instances

    cfg = _config(None, 1)
    sim = SimBackend(Oracle.from_instances(official_instances(), GOALS), cfg.sim)
    asyncio.run(serve_forever(SimHandler(sim, latency_ms / 1000), port, ready_file))


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(
    base_url: str, concurrency: int, seconds: float, server_pid: int, latency_s: float
) -> dict:
    from evoaudit.agent.loop import run_instance
    from evoaudit.evaluate.runner import episode_seed, plan_episodes
    from evoaudit.models.openai_backend import OpenAIBackend
    from evoaudit.suite.agentdojo.banking.instances import official_instances
    from evoaudit.suite.registry import get_suite

    cfg = _config(base_url, concurrency)
    backend = OpenAIBackend(cfg.executor)
    instances = official_instances()
    suite = get_suite("banking")
    lineage = 0
    specs: list = []
    failures = 0
    # Steady state: the workers run without pause; only completions that end inside the timed window
    # count, so neither the ramp-up nor the tail of unfinished episodes dilutes the rate.
    window = [float("inf"), float("inf")]
    in_window = 0
    complete = backend.complete

    async def counted(request):  # type: ignore[no-untyped-def]
        nonlocal in_window
        response = await complete(request)
        in_window += window[0] <= time.perf_counter() < window[1]
        return response

    backend.complete = counted  # type: ignore[method-assign]

    async def worker() -> None:
        nonlocal lineage, failures, specs
        while time.perf_counter() < window[1]:
            if not specs:  # a fresh lineage gives fresh seeds, so no two episodes repeat a request
                lineage += 1
                specs = plan_episodes(f"B{lineage}", "bench", "attacked", instances, GOALS)
            spec = specs.pop()
            injections = suite.injections(cfg.suite, spec.instance, spec.goal)
            _, _, ep = await run_instance(
                backend,
                cfg.agent.system_prompt,
                spec.instance,
                suite,
                spec.goal,
                injections,
                cfg.suite,
                agent=cfg.agent,
                max_steps=cfg.agent.max_steps,
                seed=episode_seed(cfg, spec),
            )
            failures += ep.infra_failure is not None and time.perf_counter() < window[1]

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    # warm-up (connections, the fingerprint, caches): at least two completions' worth of time
    await asyncio.sleep(max(0.5, 2 * latency_s))
    cpu0, server0 = time.process_time(), _cpu_s(server_pid)
    window[0] = time.perf_counter()
    window[1] = window[0] + seconds
    await asyncio.sleep(seconds)
    cpu1, server1 = time.process_time(), _cpu_s(server_pid)
    for w in workers:
        w.cancel()
    outcomes = await asyncio.gather(*workers, return_exceptions=True)
    # A worker that died of an error would otherwise leave a rate of 0 that looks like a measurement.
    errors = [o for o in outcomes if isinstance(o, Exception)]
    if errors:
        first = errors[0]
        raise RuntimeError(f"{len(errors)} of {concurrency} workers failed; the first: {first!r}") from first
    requests = in_window
    rate = requests / seconds
    # Which side is the bottleneck: CPU per request of this client (rollouts included) and of the server.
    client_ms = (cpu1 - cpu0) / max(requests, 1) * 1000
    server_ms = (server1 - server0) / max(requests, 1) * 1000
    return {
        "concurrency": concurrency,
        "requests_per_s": round(rate, 2),
        "failures": failures,
        "client_cpu_ms_per_request": round(client_ms, 3),
        "server_cpu_ms_per_request": round(server_ms, 3),
    }


def _pin(server_pid: int) -> None:
    """Endpoint on the last CPU, client on the others. On a small VM the scheduler otherwise runs the
    woken server on the client's CPU inside the client's send(), which then stalls for milliseconds."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:
        os.sched_setaffinity(server_pid, {cpus[-1]})
        os.sched_setaffinity(0, set(cpus[:-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--seconds", type=float, default=4.0, help="timed window per concurrency")
    ap.add_argument(
        "--realistic",
        action="store_true",
        help="the realistic-latency case: 1 s per completion at concurrency 256, a 12 s window",
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ready-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.realistic:
        args.latency_ms, args.concurrency, args.seconds = 1000.0, [256], max(args.seconds, 12.0)
    if args.serve:
        serve(args.port, args.latency_ms, Path(args.ready_file))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready.json"
        cmd = [
            sys.executable,
            __file__,
            "--serve",
            "--latency-ms",
            str(args.latency_ms),
            "--ready-file",
            str(ready),
        ]
        server = subprocess.Popen(cmd, env=os.environ | {"PYTHONUNBUFFERED": "1"})
        _pin(server.pid)
        try:
            for _ in range(600):
                if ready.exists() and ready.read_text().endswith("\n"):
                    break
                if server.poll() is not None:
                    raise SystemExit("the loopback server exited before it was ready")
                time.sleep(0.05)
            else:
                raise SystemExit("the loopback server did not start within 30 s")
            base_url = json.loads(ready.read_text())["base_url"]
            results = []
            latency_s = args.latency_ms / 1000
            for c in args.concurrency:
                r = asyncio.run(_measure(base_url, c, args.seconds, server.pid, latency_s))
                r["ratio_to_ideal"] = round(r["requests_per_s"] * latency_s / c, 3)
                print(
                    f"concurrency {c:3d}: {r['requests_per_s']:8.1f} requests/s, ratio {r['ratio_to_ideal']}",
                    file=sys.stderr,
                )
                results.append(r)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(json.dumps({"latency_ms": args.latency_ms, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
