"""Cluster bootstrap and paired tests, against answers computed here by hand or with numpy directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rollout_kit import mk

from evoaudit.report import metrics as m
from evoaudit.report.metrics import Transitions
from evoaudit.report.stats import FamilyBootstrap, family_signflip, mcnemar_exact


def _attacked() -> list:
    # Family f1: 2 of 2 succeed; f2: 0 of 2; f3: 1 of 4.
    rs = [mk(family="f1", variant=v, success=True) for v in ("v3", "v4")]
    rs += [mk(family="f2", variant=v, success=False) for v in ("v3", "v4")]
    rs += [mk(family="f3", variant="v3", goal=f"injection_task_{g}", success=g == 0) for g in range(4)]
    return rs


def test_bootstrap_is_seeded_and_resamples_whole_families():
    rs = _attacked()
    boot = FamilyBootstrap(["f1", "f2", "f3"], replicates=500, seed=7, level=0.9)
    # The same computation by hand: multinomial family counts, ratio of weighted family sums.
    w = np.random.default_rng(7).multinomial(3, [1 / 3] * 3, size=500).astype(float)
    nums, dens = np.array([2.0, 0.0, 1.0]), np.array([2.0, 2.0, 4.0])
    draws = (w @ nums) / (w @ dens)
    expected = tuple(np.percentile(draws, [5, 95]))
    assert boot.interval(rs, m.asr) == pytest.approx(expected)
    # Same seed: identical; another seed: another draw.
    again = FamilyBootstrap(["f3", "f1", "f2"], replicates=500, seed=7, level=0.9)
    assert again.interval(rs, m.asr) == boot.interval(rs, m.asr)
    other = FamilyBootstrap(["f1", "f2", "f3"], replicates=500, seed=8, level=0.9)
    assert not np.array_equal(other.weights, boot.weights)
    assert (boot.weights.sum(axis=1) == 3).all()


def test_interval_is_degenerate_when_every_family_has_the_same_rate():
    rs = [mk(family=f, variant=v, success=v == "v3") for f in ("f1", "f2", "f3") for v in ("v3", "v4")]
    boot = FamilyBootstrap(["f1", "f2", "f3"], replicates=200, seed=1, level=0.95)
    assert boot.interval(rs, m.asr) == (0.5, 0.5)


def test_interval_is_empty_when_the_statistic_is_mostly_undefined():
    rs = [mk(family="f1", exposed=False), mk(family="f2", exposed=False)]
    boot = FamilyBootstrap(["f1", "f2"], replicates=200, seed=1, level=0.95)
    lo, hi = boot.interval(rs, m.conditional_asr)
    assert math.isnan(lo) and math.isnan(hi)


def test_delta_interval_resamples_both_conditions_with_the_same_families():
    # The condition adds exactly +0.5 ASR in every family, so every replicate's Δ is 0.5.
    base = [mk(family=f, variant=v, success=v == "v3") for f in ("f1", "f2") for v in ("v3", "v4")]
    cond = [mk(family=f, variant=v, condition="c", success=True) for f in ("f1", "f2") for v in ("v3", "v4")]
    boot = FamilyBootstrap(["f1", "f2"], replicates=300, seed=3, level=0.95)
    assert boot.delta_interval(cond, base, m.asr) == (0.5, 0.5)


def test_mcnemar_exact_values():
    assert mcnemar_exact(Transitions(9, 0, 96)) == pytest.approx(2 / 2**9)
    assert mcnemar_exact(Transitions(5, 5, 20)) == 1.0
    assert mcnemar_exact(Transitions(0, 0, 10)) == 1.0
    # b=1, c=6: 2 × P(X ≤ 1 | n=7) = 2 × 8/128.
    assert mcnemar_exact(Transitions(1, 6, 30)) == pytest.approx(16 / 128)


def test_family_signflip_enumerates_sign_patterns():
    assert family_signflip([1, 1, 1], seed=0) == pytest.approx(2 / 8)  # all + or all −
    assert family_signflip([2, -1, 0], seed=0) == pytest.approx(1.0)  # |±2 ± 1| ≥ 1 always
    assert family_signflip([3, 1], seed=0) == pytest.approx(0.5)  # |3+1| and |−3−1| of 4 patterns
    assert family_signflip([], seed=0) == 1.0
    big = [1] * 20
    assert family_signflip(big, seed=5) == family_signflip(big, seed=5) < 0.01
