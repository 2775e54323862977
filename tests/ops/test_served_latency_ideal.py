"""The critical-path ideal of benchmarks/served_latency.py, on a small record set built here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "served_latency.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("served_latency", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _tsv(results: Path, name: str, wall: float, cpu: float) -> None:
    path = results / "benchmarks" / f"{name}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tcpu_time\n{wall}\t0:00:00\t{cpu}\n")


def _rollouts(path: Path, requests: list[int], prefix: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"rollout_id": f"{prefix}{i}", "usage": {"requests": n}}) for i, n in enumerate(requests)
    ]
    path.write_text("\n".join(lines) + "\n")


def _meta(results: Path, lineage: str, method: str, diagnostics: dict) -> None:
    path = results / "artifacts" / lineage / method / "meta.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"method": method, "lineage": lineage, "diagnostics": diagnostics}))


def _answers(**kinds: tuple[int, int]) -> dict:
    return {
        "optimizer_answers": {
            "by_kind": {k: {"answers_asked": a, "malformed_answers": m} for k, (a, m) in kinds.items()}
        }
    }


def _calls(*attempts: int) -> list[dict]:
    return [{"attempts": [{}] * n} for n in attempts]


def test_the_ideal_from_a_built_record_set(bench, tmp_path):
    r = tmp_path / "results"
    _tsv(r, "instances", 3.0, 2.0)
    _tsv(r, "acquire/L1", 9.0, 1.0)
    _rollouts(r / "acquire/L1/rollouts.jsonl", [3, 5, 4], "a")
    # ReasoningBank: one judge round (no malformed answer) and a distil round with one retry.
    _tsv(r, "evolve/L1/reasoningbank", 5.0, 1.5)
    _meta(r, "L1", "reasoningbank", _answers(judge=(10, 0), distil=(11, 1)))
    # SkillOpt: gates as deep as the longest acquisition episode (5); update 1: reflections of 1 and 2
    # attempts, ranked (1), a candidate gated;
    # update 2: one reflection, within budget, no candidate.
    _tsv(r, "evolve/L1/skillopt", 20.0, 2.0)
    skillopt = {
        "gate_initial": {"score": 0.5},
        "updates": [
            {
                "calls": _calls(1, 2),
                "ranking": {"call": {"attempts": [{}]}},
                "gate_candidate": {"score": 0.6},
            },
            {"calls": _calls(1), "ranking": {"method": "within_budget"}},
        ],
    }
    _meta(r, "L1", "skillopt", skillopt)
    for arm, requests in (("benign", [2, 7]), ("attacked", [3])):
        _tsv(r, f"evaluate/L1/static/{arm}/shard0", 8.0, 4.0)
        _rollouts(r / f"evaluate/L1/static/{arm}/shard0.jsonl", requests, arm)
    _tsv(r, "verify", 4.0, 1.0)
    (r / "verify").mkdir()
    (r / "verify/verify.json").write_text(json.dumps({"rollouts": ["benign0", "attacked0"]}))
    _tsv(r, "report", 6.0, 5.0)

    jobs = {j.name: j for j in bench.read_jobs(r, max_attempts=3)}
    assert jobs["acquire/L1"].chain == 5
    assert jobs["evolve/L1/reasoningbank"].chain == 1 + 2
    assert jobs["evolve/L1/skillopt"].chain == 5 + (2 + 1 + 5) + 1
    assert jobs["evaluate/L1/static/benign/shard0"].chain == 7
    assert jobs["verify"].chain == 3  # the longest sampled rollout, not the longest of the shards
    assert jobs["report"].chain == 0

    ideal = bench.critical_path(list(jobs.values()), latency_s=1.0, cores=2)
    s = ideal["stages"]
    assert s["suite"]["ideal_s"] == 2.0
    assert s["acquire"]["ideal_s"] == 5 + 1.0
    assert s["evolve"]["longest_job"] == "evolve/L1/skillopt" and s["evolve"]["ideal_s"] == 14 + 2.0
    assert s["evaluate"]["ideal_s"] == 7 + 4.0  # longest job beats 8 CPU seconds over 2 cores
    assert s["replay+verify"]["ideal_s"] == 3 + 1.0
    assert s["report"]["ideal_s"] == 5.0
    assert ideal["ideal_s"] == pytest.approx(2 + 6 + 16 + 11 + 4 + 5)


def test_cpu_over_the_cores_bounds_a_stage_of_many_short_jobs(bench):
    jobs = [bench.Job("evaluate", f"evaluate/L1/c{i}/benign/shard0", 5.0, 3.0, 1) for i in range(10)]
    stage = bench.critical_path(jobs, latency_s=1.0, cores=2)["stages"]["evaluate"]
    assert stage["longest_job_s"] == 4.0 and stage["cpu_over_cores_s"] == 15.0 and stage["ideal_s"] == 15.0


def test_a_retried_round_is_capped_at_max_attempts(bench):
    meta = {"method": "reasoningbank", "diagnostics": _answers(judge=(4, 9), distil=(4, 0))}
    assert bench.evolve_chain(meta, max_attempts=3) == 3 + 1
