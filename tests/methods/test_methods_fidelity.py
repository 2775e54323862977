"""Method fidelity: SkillOpt ranks its edit pool before clipping, AWM retries a malformed induction by
asking for workflows, ReasoningBank learns from judge labels by default and says so in its meta."""

from __future__ import annotations

import asyncio
import json

from test_methods_common import ScriptedBackend, make_rollout

from evoaudit import config as config_mod
from evoaudit.methods import awm, evolve, reasoningbank, skillopt
from evoaudit.methods.skillopt import Edit, rank_and_clip
from evoaudit.models.sim import roles as sim_roles

DOC = "# Skill\n\nIntro line.\n"
POOL = [
    Edit(kind="append", text="- f1", source="failure"),
    Edit(kind="append", text="- f2", source="failure"),
    Edit(kind="append", text="- s1", source="success"),
]


def _settings(budget: int, **extra) -> config_mod.MethodSettings:
    params = {"skillopt": {"step_budget": budget, "initial_skill": DOC, "protected": ["# Skill"]}}
    return config_mod.method_settings(config_mod.from_dict({"methods_params": params | extra}))


def test_a_pool_over_the_budget_is_ranked_by_the_optimizer_then_clipped_in_ranked_order():
    backend = ScriptedBackend([json.dumps({"selected_indices": [2, 0, 1], "reasoning": "x"})])
    kept, clipped, info = asyncio.run(rank_and_clip(_settings(2), "L1", 0, DOC, POOL, backend))
    assert [e.text for e in kept] == ["- s1", "- f1"]  # the optimizer's order, not the merge order
    assert [(c["text"], c["status"], c["pool_index"]) for c in clipped] == [("- f2", "clipped_budget", 1)]
    assert info["method"] == "optimizer" and info["order"] == [2, 0]
    asked = backend.requests[0].messages
    assert asked[0].content.startswith("You rank proposed edits") and "budget 2" in asked[1].content
    assert '[2] {"kind": "append", "source": "success", "text": "- s1"}' in asked[1].content


def test_a_pool_within_the_budget_is_applied_as_merged_without_a_ranking_call():
    backend = ScriptedBackend(["unused"])
    kept, clipped, info = asyncio.run(rank_and_clip(_settings(3), "L1", 0, DOC, POOL, backend))
    assert kept == POOL and clipped == [] and info["method"] == "within_budget" and not backend.requests


def test_a_ranking_that_stays_malformed_falls_back_to_the_merge_order_and_says_so():
    backend = ScriptedBackend(['{"selected_indices": [7, "a"]}', "not json"])
    kept, clipped, info = asyncio.run(
        rank_and_clip(_settings(2, max_attempts=2), "L1", 0, DOC, POOL, backend)
    )
    assert [e.text for e in kept] == ["- f1", "- f2"] and info["method"] == "fallback_merge_order"
    assert len(backend.requests) == 2 and not info["call"]["ok"]


def test_the_simulator_ranks_failure_derived_and_new_edits_first():
    pool = [
        Edit(kind="append", text="- s new", source="success"),
        Edit(kind="append", text="Intro line.", source="failure"),  # already in the document
        Edit(kind="append", text="- f new", source="failure"),
    ]
    reply = sim_roles.respond(skillopt.ranking_messages(DOC, pool, 2), 1)
    assert skillopt.parse_ranking(reply.content, 3, 2) == [2, 1]


def test_optimise_records_the_ranking_of_every_update(monkeypatch):
    async def gate(settings, episodes, lineage, skill, instances):
        return skillopt.GateScore(len(skill) / 1000, 0, 1, 0)  # longer skill, higher score: accepted

    monkeypatch.setattr(skillopt, "gate_score", gate)
    edits = json.dumps({"edits": [{"kind": "append", "text": f"- e{i}"} for i in range(3)]})
    ranking = json.dumps({"selected_indices": [1]})
    labelled = [(make_rollout("user_task_1", "v0", False), False)]
    skill, diag = asyncio.run(
        skillopt.optimise(_settings(1), "L1", labelled, [], ScriptedBackend([edits, ranking]), None)
    )
    update = diag["updates"][0]
    assert update["ranking"]["method"] == "optimizer" and skill == DOC + "- e1\n"
    assert sorted(e["status"] for e in update["edits"]) == ["applied", "clipped_budget", "clipped_budget"]


def test_a_malformed_induction_is_asked_again_for_workflows_not_for_json():
    ok = make_rollout("user_task_1", "v0", True)
    good = "## Pay\nFor payments.\n<think>Look up.</think>\n<action>get_balance()</action>\n"
    backend = ScriptedBackend(['{"workflows": []}', good])
    cfg = config_mod.from_dict({})
    state, diag = asyncio.run(evolve._run(cfg, "L1", "awm", [ok], [], backend))
    assert state[awm.STATE_FILE].startswith("## Pay") and len(diag["induction"]["attempts"]) == 2
    retry = backend.requests[1].messages[-1].content
    assert "<think>...</think>" in retry and "## " in retry and "JSON" not in retry


def test_reasoningbank_learns_from_judge_labels_by_default_and_its_meta_says_so():
    rollouts = [make_rollout("user_task_1", "v0", True), make_rollout("user_task_2", "v0", False)]
    cfg = config_mod.from_dict({"methods_params": {"reasoningbank": {"embedder": {"dims": 64}}}})
    assert evolve.success_label(cfg, "reasoningbank") == "judge"
    assert evolve.success_label(cfg, "skillopt") == evolve.success_label(cfg, "awm") == "checker"
    memories = json.dumps({"memories": [{"title": "t", "description": "d", "content": "c"}]})
    # The judge calls the first trajectory a failure (the checker said success) and the second a success.
    verdicts = ['{"success": false, "reason": "x"}', '{"success": true, "reason": "y"}']
    backend = ScriptedBackend([*verdicts, memories])
    state, diag = asyncio.run(evolve._run(cfg, "L1", "reasoningbank", rollouts, [], backend))
    assert backend.requests[0].messages[0].content.startswith("You judge whether")
    assert diag["success_label"] == "judge" and diag["judge_vs_checker_disagreements"] == 2
    assert "an LLM judge judged that it failed" in (backend.requests[2].messages[0].content or "")
    bank = json.loads(state[reasoningbank.BANK_FILE])
    assert [e["label"] for e in bank["entries"]] == [False, True]
    checker = config_mod.from_dict(
        {"methods_params": {"reasoningbank": {"success_label": "checker", "embedder": {"dims": 64}}}}
    )
    backend = ScriptedBackend([memories])
    _, diag = asyncio.run(evolve._run(checker, "L1", "reasoningbank", rollouts, [], backend))
    assert diag["success_label"] == "checker"
    assert all(not r.messages[0].content.startswith("You judge") for r in backend.requests)
