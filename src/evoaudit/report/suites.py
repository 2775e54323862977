"""What the report layer reads differently per suite, looked up by the suite a group of rollouts comes
from (``Instance.suite``, as the shards record it): the module of its metric functions, the metrics of
each arm, the failure policy its rates apply, and its simulator notice. One entry per benchmark (the
suite's ``benchmark``), so an exporter asks here instead of comparing suite names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.metrics import Ratio
from evoaudit.suite.registry import get_suite

Metric = Callable[[list[Rollout]], Ratio]


@dataclass(frozen=True)
class SuiteMetrics:
    """How one suite's rollouts are scored in the report."""

    #: Where the metric functions live (named in exported metadata).
    module: str
    #: The rollouts a rate counts under a failure policy (``exclude`` / ``count_as_failure``).
    scored: Callable[[list[Rollout], str], list[Rollout]]
    #: The metrics of a group of one arm (``benign`` / ``attacked``), by name, given its rollouts.
    metrics: Callable[[str, list[Rollout]], dict[str, Metric]]
    #: The configuration's failure policy for this suite's rates.
    policy: Callable[[Any], str]
    #: The simulator notice of this suite's report (None on a real endpoint).
    notice: Callable[[Any], str | None]
    #: The suite's name in AgentDojo's results layout (``evoaudit export agentdojo``); None for a suite
    #: that is not one of AgentDojo's.
    agentdojo_suite: str | None = None


def _agentdojo(suite: str) -> SuiteMetrics:
    """An AgentDojo suite: every harm category the rollouts carry, disclosure over the episodes that define
    it, under the suite's name in AgentDojo's results layout."""
    from evoaudit.report.simlabel import sim_notice

    def metrics(arm: str, rs: list[Rollout]) -> dict[str, Metric]:
        if arm == "benign":  # under attack the user's task is utility_under_attack
            return {"utility": m.utility}
        funcs: dict[str, Metric] = {
            "utility_under_attack": m.utility_under_attack,
            "attack_success": m.asr,
            "exposure": m.exposure,
            "conditional_asr": m.conditional_asr,
            "unauthorized_state_change": m.unauthorized_state_change,
            "disclosure": m.disclosure,
        }
        if any(r.outcome.utility_under_attack_isolated is not None for r in rs):  # Banking's variant
            funcs["utility_under_attack_isolated"] = m.utility_under_attack_isolated
        for c in sorted({c for r in rs for c in r.outcome.harm}):
            funcs[f"harm_{c}"] = m.harm_rate(c)
        return funcs

    return SuiteMetrics(
        module="evoaudit.report.metrics",
        scored=m.scored,
        metrics=metrics,
        policy=lambda cfg: cfg.evaluation.infra_failure_policy,
        notice=sim_notice,
        agentdojo_suite=suite,
    )


def _apex(suite: str) -> SuiteMetrics:
    from evoaudit.report.apex import scores as sc
    from evoaudit.report.simlabel import apex_sim_notice as sim_notice

    def metrics(arm: str, rs: list[Rollout]) -> dict[str, Metric]:
        funcs: dict[str, Metric] = {"task_score": sc.task_score, "utility": sc.utility}
        if arm == "attacked":
            funcs |= {
                "utility_under_attack": sc.utility_under_attack,
                "attack_success": sc.asr,
                "exposure": sc.exposure_rate,
            }
        return funcs

    return SuiteMetrics(
        module="evoaudit.report.apex.scores",
        scored=sc.scored,
        metrics=metrics,
        policy=lambda cfg: cfg.apex.failure_policy,
        notice=sim_notice,
    )


# Keyed by the suite's ``benchmark`` (``interface.AuditSuite``): a benchmark's suites are scored alike,
# so a new suite of a known benchmark adds nothing here.
_BENCHMARKS: dict[str, Callable[[str], SuiteMetrics]] = {"agentdojo": _agentdojo, "apex-harm": _apex}


def suite_metrics(suite: str) -> SuiteMetrics:
    """The report's scoring of ``suite``'s rollouts (ValueError naming the benchmarks the report scores
    when ``suite``'s is not one of them)."""
    benchmark = get_suite(suite).benchmark
    try:
        return _BENCHMARKS[benchmark](suite)
    except KeyError:
        raise ValueError(
            f"suite {suite!r} belongs to benchmark {benchmark!r}, which the report does not score; "
            f"known: {sorted(_BENCHMARKS)}"
        ) from None
