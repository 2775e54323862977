"""Uncertainty: a cluster bootstrap over families, and paired tests on benign transitions.

Families are the sampling units: variants, goals and lineages of one family are repeated measurements of
it and move together in every resample. One weight matrix (replicates × families, multinomial counts)
is drawn per family set from a seeded generator and shared by every statistic computed on that set, so
intervals are reproducible bit for bit and Δs are resampled jointly with their two levels.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from evoaudit.records import Rollout
from evoaudit.report.metrics import Ratio, Transitions

INTERVAL_NOTE = (
    "Intervals are {level:.0%} percentile intervals from a cluster bootstrap ({replicates} replicates, "
    "seed {seed}) that resamples whole families with replacement, so the variants, goals and lineages of a "
    "family move together and Δs are resampled jointly with both of their levels. They license a statement "
    "about the family-average effect for this executor, these frozen artifacts and this attack template, "
    "treating the families as a sample of similar {tasks}. They do not cover re-running evolution "
    "beyond the lineages observed (the lineage table shows that spread), other executors, suites or attack "
    "templates; with few families they are approximate and can be too narrow, and they are not adjusted "
    "for the many comparisons in this report. An interval whose replicates were undefined too often "
    "(e.g. conditional ASR with no exposure) is left empty."
)
TESTS_NOTE = (
    "Paired tests on benign transitions: p_mcnemar is the exact two-sided McNemar test on the discordant "
    "pairs (W→C vs C→W), which treats every (lineage, family, variant) pair as independent and so "
    "overstates the evidence when a family's variants move together; p_family_signflip is a two-sided "
    "sign-flip test on each family's net count (W→C − C→W), exact up to 16 families, which treats families "
    "as the units. Neither is adjusted for multiple comparisons."
)


class FamilyBootstrap:
    """Percentile intervals for ratio-of-sums statistics, resampling families."""

    def __init__(self, families: Sequence[str], replicates: int, seed: int, level: float) -> None:
        self.families = sorted(set(families))
        self.index = {f: i for i, f in enumerate(self.families)}
        self.replicates = replicates
        self.seed = seed
        self.level = level
        n = len(self.families)
        rng = np.random.default_rng(seed)
        self.weights = (
            rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).astype(float)
            if n
            else np.zeros((replicates, 0))
        )

    def _per_family(self, rollouts: list[Rollout], metric: Callable[[list[Rollout]], Ratio]):
        groups: dict[str, list[Rollout]] = defaultdict(list)
        for r in rollouts:
            groups[r.family].append(r)
        nums = np.zeros(len(self.families))
        dens = np.zeros(len(self.families))
        for fam, rs in groups.items():
            if fam not in self.index:
                continue  # outside this family set (a sensitivity subset): not part of the estimand
            ratio = metric(rs)
            nums[self.index[fam]], dens[self.index[fam]] = ratio.num, ratio.den
        return nums, dens

    def _replicates(self, rollouts: list[Rollout], metric: Callable[[list[Rollout]], Ratio]) -> np.ndarray:
        nums, dens = self._per_family(rollouts, metric)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (self.weights @ nums) / np.where((d := self.weights @ dens) == 0, np.nan, d)

    def _interval(self, draws: np.ndarray) -> tuple[float, float]:
        finite = draws[np.isfinite(draws)]
        # An interval is only shown when (almost) every replicate defines the statistic.
        if len(finite) < 0.95 * len(draws) or len(finite) == 0:
            return math.nan, math.nan
        tail = (1 - self.level) / 2 * 100
        lo, hi = np.percentile(finite, [tail, 100 - tail])
        return float(lo), float(hi)

    def interval(self, rollouts: list[Rollout], metric: Callable[[list[Rollout]], Ratio]):
        return self._interval(self._replicates(rollouts, metric))

    def delta_interval(
        self,
        a: list[Rollout],
        b: list[Rollout],
        metric: Callable[[list[Rollout]], Ratio],
        metric_b: Callable[[list[Rollout]], Ratio] | None = None,
    ) -> tuple[float, float]:
        """Interval of metric(a) − metric(b), both computed on the same resampled families; ``metric_b``
        computes b's side where it differs (e.g. wall times looked up per arm)."""
        return self._interval(self._replicates(a, metric) - self._replicates(b, metric_b or metric))

    def delta_of_deltas_interval(
        self,
        a: tuple[list[Rollout], list[Rollout]],
        b: tuple[list[Rollout], list[Rollout]],
        metric: Callable[[list[Rollout]], Ratio],
    ) -> tuple[float, float]:
        """Interval of (metric(a[0]) − metric(a[1])) − (metric(b[0]) − metric(b[1])), all four on the same
        resampled families (e.g. a defence's effect on an evolved condition minus its effect on the
        baseline)."""
        da = self._replicates(a[0], metric) - self._replicates(a[1], metric)
        return self._interval(da - (self._replicates(b[0], metric) - self._replicates(b[1], metric)))

    def paired_interval(
        self, a: list[Rollout], b: list[Rollout], paired: Callable[[list[Rollout], list[Rollout]], Ratio]
    ) -> tuple[float, float]:
        """Interval of a statistic of paired sets (e.g. net transitions), computed per family."""
        nums = np.zeros(len(self.families))
        dens = np.zeros(len(self.families))
        by_a: dict[str, list[Rollout]] = defaultdict(list)
        by_b: dict[str, list[Rollout]] = defaultdict(list)
        for r in a:
            by_a[r.family].append(r)
        for r in b:
            by_b[r.family].append(r)
        for fam, i in self.index.items():
            ratio = paired(by_a.get(fam, []), by_b.get(fam, []))
            nums[i], dens[i] = ratio.num, ratio.den
        with np.errstate(invalid="ignore", divide="ignore"):
            draws = (self.weights @ nums) / np.where((d := self.weights @ dens) == 0, np.nan, d)
        return self._interval(draws)


def mcnemar_exact(t: Transitions) -> float:
    """Two-sided exact McNemar p-value on the discordant pairs (treats pairs as independent)."""
    n = t.w_to_c + t.c_to_w
    if n == 0:
        return 1.0
    k = min(t.w_to_c, t.c_to_w)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def family_signflip(per_family: Sequence[int], seed: int, draws: int = 20000) -> float:
    """Two-sided sign-flip test of Σ_f d_f = 0, with d_f = W→C − C→W within family f.

    Under no effect the condition labels are exchangeable within each family, so each family's net count
    is as likely negated; this respects the clustering that McNemar ignores. Exact up to 16 non-zero
    families, Monte Carlo (seeded) beyond.
    """
    d = np.array([x for x in per_family if x != 0], dtype=float)
    if len(d) == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-9
    if len(d) <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(draws, len(d)))
    return float(np.mean(np.abs(signs @ d) >= observed))


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the proportion k/n (NaN, NaN when n is 0): for counts whose units are not
    families (an artifact's units, the poisoning extension's tables), where no cluster bootstrap applies."""
    if n == 0:
        return float("nan"), float("nan")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    # Rounded so that a bound at 0 or 1 reads as exactly that, not as a float residue.
    return max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12))
