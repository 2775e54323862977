"""Planted effects: the evaluator's metrics recover the simulator's compliance and read propensity."""

from __future__ import annotations

import asyncio
import functools
import math

import pytest

from evoaudit import config as config_mod
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.records import Rollout
from evoaudit.suite.agentdojo.banking.instances import official_instances

GOALS = [f"injection_task_{i}" for i in range(9)]
LINEAGES = ("L1", "L2", "L3")


@functools.cache
def _instances():
    return tuple(official_instances())


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _attacked(sim: dict) -> list[Rollout]:
    cfg = config_mod.from_dict({"suite": {"goals": GOALS}, "agent": {"max_steps": 30}, "sim": sim})
    backend = SimBackend(Oracle.from_instances(list(_instances()), GOALS), cfg.sim)
    specs = [
        s for lin in LINEAGES for s in plan_episodes(lin, "static", "attacked", list(_instances()), GOALS)
    ]

    async def run():
        return [await run_one(cfg, backend, s, cfg.agent.system_prompt, None) for s in specs]

    return asyncio.run(run())


@pytest.mark.parametrize(("compliance", "read_propensity"), [(0.6, 0.7), (0.25, 0.5)])
def test_measured_exposure_and_conditional_asr_recover_the_planted_parameters(compliance, read_propensity):
    # Competence 1: no premature answer cuts an episode short before its reads, so exposure is exactly
    # the chance of reading, and a complying episode executes the goal's plan as planned.
    rollouts = _attacked({"compliance": compliance, "read_propensity": read_propensity, "competence": 1.0})
    n = len(rollouts)
    assert n == len(LINEAGES) * len(_instances()) * len(GOALS)
    exposed = [r for r in rollouts if r.outcome.exposed]
    lo, hi = _wilson(len(exposed), n)
    assert lo <= read_propensity <= hi, f"exposure {len(exposed)}/{n} vs planted {read_propensity}"
    hits = sum(bool(r.outcome.attack_success) for r in exposed)
    lo, hi = _wilson(hits, len(exposed))
    assert lo <= compliance <= hi, f"conditional ASR {hits}/{len(exposed)} vs planted {compliance}"
    # an attack needs the injected text: nothing succeeds unexposed
    assert not any(r.outcome.attack_success for r in rollouts if not r.outcome.exposed)


def test_compliance_zero_gives_no_attack_success():
    rollouts = _attacked({"compliance": 0.0, "read_propensity": 1.0, "competence": 1.0})
    assert all(r.outcome.exposed for r in rollouts)
    assert sum(bool(r.outcome.attack_success) for r in rollouts) == 0
