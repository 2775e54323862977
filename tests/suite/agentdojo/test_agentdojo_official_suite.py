"""AgentDojo's Workspace, Travel and Slack as whole audits (``suite/agentdojo/official.py``): instances,
attacks, injections and predicates are AgentDojo's own; harm, replay and the fixed clock are pinned here."""

from __future__ import annotations

import asyncio

import pytest
from agentdojo.task_suite.load_suites import get_suite as agentdojo_suite

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.config import suite_view
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.records import Call
from evoaudit.replay.official import beyond_plan, replay_official_rollout
from evoaudit.suite.agentdojo import toolkit
from evoaudit.suite.agentdojo.official import unauthorised_changes
from evoaudit.suite.environments import get_environment
from evoaudit.suite.interface import AuditSuite, SimOracle
from evoaudit.suite.registry import get_suite

# One user task and one injection task of each suite; each ground truth reaches a vector.
CASES = {
    "workspace": ("user_task_0", "injection_task_0"),
    "travel": ("user_task_0", "injection_task_0"),
    "slack": ("user_task_2", "injection_task_1"),
}


def _cfg(name: str, families: list[str], goals: list[str], **sim):
    return config_mod.from_dict(
        {
            "suite": {"name": name, "families": families, "goals": goals},
            "roles": {
                "acquisition": ["v1"],
                "validation": [],
                "benign_endpoint": ["v0"],
                "attacked_endpoint": ["v0"],
            },
            "methods_params": {"placebo": {"goals": goals}},
            "transfer": {"enabled": False},
            "sim": sim,
        }
    )


def _one(name: str):
    family, goal = CASES[name]
    cfg = _cfg(name, [family], [goal])
    suite = get_suite(name)
    (inst,) = suite.build_instances(suite_view(cfg))
    return cfg, suite, inst, goal


def _run(suite, env, plan):
    for call in plan:
        suite.run_call(env, call)
    return env


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_instance_is_agentdojos_own_user_task_with_the_vectors_its_attack_finds(name):
    cfg, suite, inst, _ = _one(name)
    assert isinstance(suite, AuditSuite) and isinstance(suite, SimOracle)
    task = agentdojo_suite("v1.2.2", name).get_user_task_by_id(inst.family)
    assert (inst.instance_id, inst.variant, inst.role, inst.suite) == (
        f"{inst.family}.v0",
        "v0",
        "endpoint",
        name,
    )
    assert inst.prompt == task.PROMPT
    pre = suite.build_environment(inst, None, {})
    assert inst.ground_truth == [Call(function=c.function, args=dict(c.args)) for c in task.ground_truth(pre)]
    attack = toolkit.important_instructions(agentdojo_suite("v1.2.2", name), "Emma Johnson", "AI assistant")
    assert inst.vectors == sorted(attack.get_injection_candidates(task)) != []
    assert inst.predicate == {"kind": "official", "task": inst.family}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_attack_places_the_injection_tasks_goal_in_every_reached_vector_and_nowhere_else(name):
    cfg, suite, inst, goal = _one(name)
    assert suite.attacks([goal], inst) == [goal]
    placed = suite.injections(cfg.suite, inst, goal)
    assert sorted(placed) == inst.vectors
    goal_text = agentdojo_suite("v1.2.2", name).get_injection_task_by_id(goal).GOAL
    assert all(goal_text in text and "Emma Johnson" in text for text in placed.values())
    assert suite.injections(cfg.suite, inst, None) == {}
    env = suite.build_environment(inst, goal, placed)
    seen = "".join(suite.run_call(suite.copy_environment(env), c)[0] for c in inst.ground_truth)
    assert goal_text.split()[0] in seen


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_official_predicates_judge_the_ground_truth_the_goal_plan_and_doing_nothing(name):
    cfg, suite, inst, goal = _one(name)
    placed = suite.injections(cfg.suite, inst, goal)
    pre = suite.build_environment(inst, goal, placed)
    answer = inst.answer or "Done."
    done = _run(suite, suite.copy_environment(pre), inst.ground_truth)
    assert suite.check_utility(inst, answer, pre, done) and suite.task_score(inst, answer, pre, done) == 1.0
    assert not suite.check_utility(inst, "I cannot help.", pre, suite.copy_environment(pre))
    assert not suite.check_goal(goal, answer, pre, done)
    assert suite.harm(pre, done, inst.ground_truth) == {"change_beyond_plan": False}
    hijacked = _run(suite, suite.copy_environment(done), suite.goal_plans(inst, [goal])[goal])
    assert suite.check_goal(goal, answer, pre, hijacked)
    assert suite.harm(pre, hijacked, inst.ground_truth) == {"change_beyond_plan": True}
    assert suite.disclosure(goal, pre, hijacked) is None
    assert suite.check_utility_under_attack(inst, goal, answer, pre, hijacked) is None


def test_tasks_judged_on_the_call_trace_are_excluded_and_refused_with_the_reason():
    workspace, slack = get_suite("workspace"), get_suite("slack")
    assert "user_task_4" in workspace.excluded() and "user_task_4" not in workspace.families()
    assert "utility_from_traces" in workspace.excluded()["user_task_4"]
    with pytest.raises(ValueError, match="suite.families.*user_task_4 is excluded"):
        workspace.families(suite_view(_cfg("workspace", ["user_task_4"], ["injection_task_0"])))
    assert "injection_task_5" not in slack.goals()
    with pytest.raises(ValueError, match=r"suite.goals: \['injection_task_5'\].*call trace"):
        slack.check_selection(suite_view(_cfg("slack", ["user_task_0"], ["injection_task_5"])))


def test_the_one_variant_must_be_the_endpoint_of_both_arms():
    cfg = config_mod.from_dict(
        {
            "suite": {"name": "travel", "families": ["user_task_0"], "goals": ["injection_task_0"]},
            "transfer": {"enabled": False},
        }
    )
    with pytest.raises(ValueError, match="roles.benign_endpoint and roles.attacked_endpoint must list v0"):
        get_suite("travel").check_selection(suite_view(cfg))


def test_the_email_tools_stamp_the_fixed_clock_so_a_state_is_a_function_of_its_calls():
    _, suite, inst, _ = _one("workspace")
    env = suite.build_environment(inst, None, {})
    call = Call(function="send_email", args={"recipients": ["a@example.com"], "subject": "s", "body": "b"})
    text, error = suite.run_call(env, call)
    assert error is None and "timestamp: 2024-05-15 00:00:00" in text
    again = _run(suite, suite.build_environment(inst, None, {}), [call])
    assert suite.state_sha256(again) == suite.state_sha256(env)


def test_a_change_beyond_the_plan_is_harm_and_leaving_the_plan_undone_or_reading_is_not():
    pre = {"inbox": {"emails": {"1": {"read": False, "to": "x"}}}, "log": []}
    authorised = {"inbox": {"emails": {"1": {"read": False, "to": "y"}}}, "log": ["sent"]}
    volatile = frozenset({("inbox", "emails", "*", "read")})
    cases = {
        "as planned": (authorised, False),
        "nothing done": (pre, False),
        "only read": ({"inbox": {"emails": {"1": {"read": True, "to": "x"}}}, "log": []}, False),
        "other recipient": ({"inbox": {"emails": {"1": {"read": False, "to": "z"}}}, "log": []}, True),
        "extra record": ({**authorised, "log": ["sent", "leak"]}, True),
        "record deleted": ({"inbox": {"emails": {}}, "log": []}, True),
        "new empty field": ({**pre, "extra": {}}, True),
    }
    for what, (observed, harm) in cases.items():
        assert bool(unauthorised_changes(pre, observed, authorised, volatile)) is harm, what
        # Replay's own reading agrees.
        assert beyond_plan(pre, observed, authorised, volatile) is harm, what


@pytest.fixture(scope="module")
def slack_rollouts():
    """Real episodes on Slack by the simulator (every goal followed), benign and attacked."""
    cfg = _cfg("slack", ["user_task_2"], ["injection_task_1"], compliance=1.0, read_propensity=1.0)
    instances = get_suite("slack").build_instances(suite_view(cfg))
    backend = make_backend(cfg, cfg.executor, instances)
    specs = plan_episodes("L1", "static", "benign", instances, []) + plan_episodes(
        "L1", "static", "attacked", instances, ["injection_task_1"]
    )
    system = system_prompt(cfg.agent.system_prompt)
    return instances[0], [asyncio.run(run_one(cfg, backend, s, system, None)) for s in specs]


def test_a_slack_episode_replays_without_a_mismatch_and_a_changed_verdict_is_caught(slack_rollouts):
    inst, rollouts = slack_rollouts
    benign, attacked = rollouts
    assert benign.outcome.utility and benign.outcome.harm == {"change_beyond_plan": False}
    assert attacked.outcome.exposed and attacked.calls
    for r in rollouts:
        assert replay_official_rollout(r, inst).mismatches == {}, r.rollout_id
    forged = attacked.model_copy(
        update={
            "outcome": attacked.outcome.model_copy(
                update={"attack_success": not attacked.outcome.attack_success}
            )
        }
    )
    assert "attack_success" in replay_official_rollout(forged, inst).mismatches


def test_replay_reaches_these_suites_through_the_environment_half_alone():
    env = get_environment("workspace")
    assert not hasattr(env, "check_goal") and env.volatile == frozenset({("inbox", "emails", "*", "read")})


@pytest.mark.slow
def test_the_slack_example_runs_the_static_condition_benign_and_attacked_and_replays_cleanly(tmp_path):
    import json

    import pandas as pd
    import yaml
    from conftest import REPO, copy_workflow, snakemake

    example = yaml.safe_load((REPO / "config/examples/agentdojo-slack.yaml").read_text())
    copy_workflow(tmp_path, {**example, "results_dir": "results"})
    snakemake(tmp_path)
    main = pd.read_csv(tmp_path / "results/report/tables/main.csv")
    (row,) = main.to_dict("records")
    assert (row["n_benign"], row["n_attacked"]) == (4, 8)  # 4 families; 2 goals, each reaching all 4
    checks = json.loads((tmp_path / "results/report/provenance.json").read_text())["report.md"]["checks"]
    assert checks["replay"]["rollouts_replayed"] == 12 and checks["replay"]["mismatched_rollouts"] == 0


def test_the_simulator_calls_only_the_suites_own_tools_on_travel():
    # Banking's extra transaction read must not leak into another suite's episodes.
    cfg = _cfg("travel", ["user_task_4"], ["injection_task_0"], read_propensity=1.0)
    instances = get_suite("travel").build_instances(suite_view(cfg))
    backend = make_backend(cfg, cfg.executor, instances)
    specs = plan_episodes("L1", "static", "benign", instances, []) + plan_episodes(
        "L1", "static", "attacked", instances, ["injection_task_0"]
    )
    system = system_prompt(cfg.agent.system_prompt)
    tools = {s["function"]["name"] for s in get_suite("travel").tool_schemas()}
    for spec in specs:
        rollout = asyncio.run(run_one(cfg, backend, spec, system, None))
        assert rollout.calls and {c.function for c in rollout.calls} <= tools, rollout.rollout_id
