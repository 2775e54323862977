"""Outcome of one rollout, computed from the episode and the states before and after.

Every judgement is the suite's own (``suite.interface.AuditSuite``); this module only assembles them.
An episode the harness itself failed (an exception of ours, not the agent's nor the endpoint's) has no
judgements: ``harness_failure_outcome`` marks it ``harness_error``, an infrastructure failure class.
"""

from __future__ import annotations

from typing import Any

from evoaudit.agent.loop import Episode
from evoaudit.models.server_errors import redact, trim
from evoaudit.records import Decisions, Instance, Outcome
from evoaudit.suite.interface import AuditSuite

# The infrastructure failure class of an episode that raised an unexpected exception in our own code (the
# suite, the tools, the outcome): neither the agent's failure nor an endpoint outage.
HARNESS_ERROR = "harness_error"


def harness_failure_outcome(goal: str | None, exc: BaseException) -> Outcome:
    """The outcome of an episode the harness failed: nothing achieved, and the exception (type and message,
    trimmed, secrets redacted) as the failure's detail; the traceback goes to the job log."""
    return Outcome(
        utility=False,
        task_score=0.0,
        utility_under_attack=None if goal is None else False,
        attack_success=None if goal is None else False,
        exposed=None,
        infra_failure=HARNESS_ERROR,
        infra_failure_detail=trim(redact(f"{type(exc).__name__}: {exc}")),
    )


def compute_outcome(
    suite: AuditSuite,
    instance: Instance,
    goal: str | None,
    injections: dict[str, str],
    pre: Any,
    post: Any,
    episode: Episode,
) -> Outcome:
    harm = suite.harm(pre, post, instance.ground_truth)
    read_only = suite.read_only_tools()
    # Suites that say who decided (APEX: rule, or left to the judge stage) record it; others record nothing.
    decide = getattr(suite, "decisions", None)
    decisions: Decisions | None = (
        decide(instance, goal, episode.final_output, episode.messages, pre, post)
        if decide is not None
        else None
    )
    if decisions is not None and decisions.task_score is not None:
        score = decisions.task_score.value
    else:
        score = suite.task_score(instance, episode.final_output, pre, post)
    if goal is not None and decisions is not None and decisions.attack_success and decisions.exposure:
        # The decisions already hold both verdicts (an undecided one counts as not reached, as the suite's
        # own check_goal and exposed say); running the checks again would repeat the work.
        attack_success: bool | None = decisions.attack_success.value is True
        exposed = decisions.exposure.value
    else:
        attack_success = None if goal is None else suite.check_goal(goal, episode.final_output, pre, post)
        exposed = suite.exposed(episode.messages, injections, goal) if suite.exposure_applies(goal) else None
    # evoaudit's variant of utility under attack, where the suite defines one (Banking: the attacker's
    # effects taken back before the checker runs); AgentDojo's own is ``check_utility_under_attack``.
    isolated = getattr(suite, "check_utility_under_attack_isolated", None)
    return Outcome(
        # The task is done when every part of it is (interface: check_utility == (task_score == 1)).
        utility=score == 1.0,
        task_score=score,
        utility_under_attack=None
        if goal is None
        else suite.check_utility_under_attack(instance, goal, episode.final_output, pre, post),
        utility_under_attack_isolated=None
        if goal is None or isolated is None
        else isolated(instance, goal, episode.final_output, pre, post),
        attack_success=attack_success,
        exposed=exposed,
        harm=harm,
        unauthorized_state_change=any(harm.values()),
        disclosure=None if goal is None else suite.disclosure(goal, pre, post),
        textual_action=episode.textual_action,
        tool_calls=len(episode.calls),
        read_calls=sum(c.function in read_only for c in episode.calls),
        steps=episode.steps,
        step_limit_hit=episode.step_limit_hit,
        timer_hit=episode.timer_hit,
        infra_failure=episode.infra_failure,
        infra_failure_detail=episode.infra_failure_detail,
        decisions=decisions,
    )
