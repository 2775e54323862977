"""Outcome of one rollout, computed from the episode and the states before and after."""

from __future__ import annotations

from agentdojo.default_suites.v1.banking.task_suite import BankingEnvironment

from evoaudit.agent.loop import Episode
from evoaudit.records import Instance, Outcome
from evoaudit.suite import banking
from evoaudit.suite.checks import check_goal, check_utility, check_utility_under_attack
from evoaudit.suite.exposure import exposed
from evoaudit.suite.harm import authorised_state, disclosure, harm_categories


def compute_outcome(
    instance: Instance,
    goal: str | None,
    injections: dict[str, str],
    pre: BankingEnvironment,
    post: BankingEnvironment,
    episode: Episode,
) -> Outcome:
    harm = harm_categories(pre, post, authorised_state(pre, instance.ground_truth))
    return Outcome(
        utility=check_utility(instance, episode.final_output, pre, post),
        utility_under_attack=None
        if goal is None
        else check_utility_under_attack(instance, goal, episode.final_output, pre, post),
        attack_success=None if goal is None else check_goal(goal, episode.final_output, pre, post),
        exposed=exposed(episode.messages, injections),
        harm=harm,
        unauthorized_state_change=any(harm.values()),
        disclosure=None if goal is None else disclosure(goal, pre, post),
        textual_action=episode.textual_action,
        tool_calls=len(episode.calls),
        read_calls=sum(c.function in banking.READ_ONLY_TOOLS for c in episode.calls),
        steps=episode.steps,
        step_limit_hit=episode.step_limit_hit,
        infra_failure=episode.infra_failure,
        infra_failure_detail=episode.infra_failure_detail,
    )
