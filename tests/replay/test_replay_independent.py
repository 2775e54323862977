"""Replay's second implementation: it agrees with the evaluator where both are right, and a bug planted in
the evaluator's corrected predicate surfaces as a mismatch instead of being recomputed the same way."""

from __future__ import annotations

import asyncio

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.records import Call
from evoaudit.replay import predicates
from evoaudit.replay.recompute import replay_rollout
from evoaudit.suite.agentdojo.banking import checks
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.families import FAMILIES
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.agentdojo.banking.probes import run_plan, utility_probes


def _cfg(profile: str = "published", **sim):
    return config_mod.from_dict(
        {"suite": {"checker_audit": {"profile": profile}}, "sim": sim, "agent": {"max_steps": 20}}
    )


@pytest.mark.parametrize("profile", ["published", "strict"])
def test_both_implementations_agree_on_every_probe_state_of_every_variant(profile):
    asks = {f.family: f.asks for f in FAMILIES}
    compared = 0
    for inst in build_instances(_cfg(profile)):
        if inst.variant not in ("v0", "v3"):
            continue
        pre = banking.build_environment(inst.environment_template)
        amounts = inst.predicate.get("answer_amounts", [100.0])
        for probe in utility_probes(inst.ground_truth, inst.answer, amounts, asks[inst.family], "strict"):
            for plan, output in probe.alternatives:
                post = run_plan(pre, plan)
                mine = checks.check_utility(inst, output, pre, post)
                theirs = predicates.utility(
                    inst.predicate, output, banking.state_dict(pre), banking.state_dict(post)
                )
                assert mine == theirs, (inst.instance_id, probe.name)
                compared += 1
    assert compared > 150


def _did_both(instance, goal):
    """The user's task (ground truth) and then the goal's own ground truth: what a complying agent does."""
    pre = banking.build_environment(instance.environment_template)
    attack = [
        Call(function=c.function, args=dict(c.args))
        for c in banking.injection_task(goal).ground_truth(pre.model_copy(deep=True))
    ]
    return pre, run_plan(pre, [*instance.ground_truth, *attack])


@pytest.mark.parametrize("profile", ["published", "strict"])
def test_user_task_done_alongside_the_attackers_transfer_counts_in_the_isolated_variant_only(profile):
    by_id = {i.instance_id: i for i in build_instances(_cfg(profile))}
    for instance_id, goal in (
        ("user_task_3.v3", "injection_task_3"),
        ("user_task_5.v3", "injection_task_5"),
        ("user_task_15.v3", "injection_task_4"),
        ("user_task_0.v3", "injection_task_7"),
    ):
        inst = by_id[instance_id]
        pre, post = _did_both(inst, goal)
        assert checks.check_goal(goal, "", pre, post), (instance_id, goal)
        assert checks.check_utility_under_attack_isolated(inst, goal, "", pre, post), (instance_id, goal)
        pre_d, post_d = banking.state_dict(pre), banking.state_dict(post)
        assert predicates.utility(inst.predicate, "", pre_d, predicates.user_side(goal, pre_d, post_d))
        # AgentDojo's utility under attack is the checker on the real terminal state, attacker's effects in.
        assert checks.check_utility_under_attack(inst, goal, "", pre, post) == checks.check_utility(
            inst, "", pre, post
        )
        if profile == "strict" and goal != "injection_task_7":
            # The delta predicate alone fails the episode for the attacker's extra transfer.
            assert not checks.check_utility(inst, "", pre, post), instance_id
            assert not checks.check_utility_under_attack(inst, goal, "", pre, post), instance_id
        # Only the attacker's effects are taken back: the attacker alone does not do the user's task.
        attack_only = run_plan(pre, [c for c in banking.injection_task(goal).ground_truth(pre)])
        assert not checks.check_utility_under_attack_isolated(inst, goal, "", pre, attack_only), instance_id


@pytest.fixture(scope="module")
def rollouts_with_planted_bug():
    """Real episodes recorded by an evaluator whose corrected predicate has a planted bug: the delta
    repair of task 5 looks among the pre-state's records instead of the new ones (an inverted filter)."""
    cfg = _cfg(competence=1.0, read_propensity=1.0, compliance=1.0)
    instances = [i for i in build_instances(cfg) if i.variant == "v3"]
    chosen = [i for i in instances if i.family in ("user_task_11", "user_task_5")]
    backend = make_backend(cfg, cfg.executor, instances)
    specs = plan_episodes("L1", "static", "benign", chosen, []) + plan_episodes(
        "L1", "static", "attacked", chosen, ["injection_task_5"]
    )
    system = system_prompt(cfg.agent.system_prompt)
    honest = [asyncio.run(run_one(cfg, backend, s, system, None)) for s in specs]
    original = checks._clause_holds

    def buggy(clause, output, pre, post, where):
        if clause.get("clause") == "transfer" and clause["scope"] == "new":
            return original(clause | {"scope": "all"}, output, pre, pre, where)
        return original(clause, output, pre, post, where)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checks, "_clause_holds", buggy)
        planted = [asyncio.run(run_one(cfg, backend, s, system, None)) for s in specs]
    return {i.instance_id: i for i in instances}, honest, planted


def test_honest_records_replay_cleanly(rollouts_with_planted_bug):
    by_id, honest, _ = rollouts_with_planted_bug
    for r in honest:
        assert replay_rollout(r, by_id[r.instance_id]).mismatches == {}, r.rollout_id


def test_a_bug_planted_in_a_corrected_predicate_makes_replay_report_a_mismatch(rollouts_with_planted_bug):
    by_id, honest, planted = rollouts_with_planted_bug
    changed = [p for h, p in zip(honest, planted, strict=True) if h.outcome != p.outcome]
    # Every task-5 episode that paid the difference is now recorded as a failure.
    assert any(p.family == "user_task_5" for p in changed), "the planted bug changed no recorded outcome"
    for r in changed:
        found = replay_rollout(r, by_id[r.instance_id]).mismatches
        assert {"utility", "utility_under_attack"} & set(found), (r.rollout_id, found)


def test_replay_recomputes_both_utilities_under_attack(rollouts_with_planted_bug):
    by_id, honest, _ = rollouts_with_planted_bug
    attacked = [r for r in honest if r.arm == "attacked"]
    assert attacked and all(r.outcome.utility_under_attack_isolated is not None for r in attacked)
    # The compliant simulator pays the attacker: AgentDojo's utility under attack (real terminal state)
    # and the isolated variant (attacker's effects taken back) are recorded apart, and each is recomputed.
    for r in attacked:
        for name in ("utility_under_attack", "utility_under_attack_isolated"):
            value = getattr(r.outcome, name)
            forged = r.model_copy(update={"outcome": r.outcome.model_copy(update={name: not value})})
            found = replay_rollout(forged, by_id[r.instance_id]).mismatches
            assert found == {name: (not value, value)}, (r.rollout_id, name, found)
