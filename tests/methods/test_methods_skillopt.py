"""SkillOpt's update rule: typed edits, protected regions, patch merge and budget, the strict gate."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from test_methods_common import ScriptedBackend, make_rollout

from evoaudit import config as config_mod
from evoaudit.methods import skillopt
from evoaudit.methods.common import MalformedOutput
from evoaudit.methods.protocol import EvolveInputs
from evoaudit.methods.skillopt import Edit, apply_edit, merge_patches, parse_edits
from evoaudit.seeds import derive_seed

DOC = "# Skill\n\nIntro line.\n- rule one\n- rule two\n"
PROTECTED = ("# Skill",)


def test_append_adds_text_at_the_end():
    doc, status = apply_edit(DOC, Edit(kind="append", text="- rule three"), PROTECTED)
    assert status == "applied" and doc == DOC + "- rule three\n"


def test_insert_after_places_text_after_the_first_occurrence():
    doc, status = apply_edit(
        DOC, Edit(kind="insert_after", target="- rule one", text="- inserted"), PROTECTED
    )
    assert status == "applied" and doc == "# Skill\n\nIntro line.\n- rule one\n- inserted\n- rule two\n"


def test_insert_after_a_missing_target_appends():
    doc, status = apply_edit(DOC, Edit(kind="insert_after", target="- nowhere", text="- new"), PROTECTED)
    assert status == "appended_missing_target" and doc.endswith("- rule two\n- new\n")


def test_replace_and_delete_act_on_the_first_occurrence_only():
    twice = DOC + "- rule one\n"
    doc, status = apply_edit(twice, Edit(kind="replace", target="- rule one", text="- rule 1"), PROTECTED)
    assert status == "applied" and doc.count("- rule 1") == 1 and doc.count("- rule one") == 1
    assert doc.index("- rule 1") < doc.index("- rule one")
    doc, status = apply_edit(twice, Edit(kind="delete", target="- rule one\n"), PROTECTED)
    assert status == "applied" and doc == "# Skill\n\nIntro line.\n- rule two\n- rule one\n"


@pytest.mark.parametrize("kind", ["replace", "delete"])
def test_replace_or_delete_with_a_missing_target_is_skipped(kind):
    edit = Edit(kind=kind, target="- absent", text="x" if kind == "replace" else None)
    doc, status = apply_edit(DOC, edit, PROTECTED)
    assert status == "skipped_missing_target" and doc == DOC


@pytest.mark.parametrize(
    "edit",
    [
        Edit(kind="replace", target="# Skill", text="# Other"),
        Edit(kind="delete", target="Skill\n\nIntro"),  # overlaps the protected region
        Edit(kind="insert_after", target="# Sk", text="x"),  # insertion point inside the region
    ],
)
def test_protected_regions_are_never_edited(edit):
    doc, status = apply_edit(DOC, edit, PROTECTED)
    assert status == "skipped_protected" and doc == DOC


def test_insert_right_after_a_protected_region_is_allowed():
    doc, status = apply_edit(DOC, Edit(kind="insert_after", target="# Skill", text="Sub"), PROTECTED)
    assert status == "applied" and doc.startswith("# Skill\nSub\n")


def test_parse_caps_edits_at_L_and_rejects_unknown_kinds_and_missing_fields():
    many = json.dumps({"edits": [{"kind": "append", "text": f"- {i}"} for i in range(6)]})
    assert len(parse_edits(many, 4, "failure")) == 4
    with pytest.raises(MalformedOutput, match="kind 'rewrite'"):
        parse_edits('{"edits": [{"kind": "rewrite", "text": "x"}]}', 4, "failure")
    with pytest.raises(MalformedOutput, match="target"):
        parse_edits('{"edits": [{"kind": "replace", "text": "x"}]}', 4, "failure")
    with pytest.raises(MalformedOutput, match="'edits' list"):
        parse_edits('{"changes": []}', 4, "failure")


def test_merge_puts_failure_edits_first_and_removes_duplicates_and_region_conflicts():
    f = [
        Edit(kind="replace", target="- rule one", text="- a", source="failure"),
        Edit(kind="append", text="- f2", source="failure"),
    ]
    s = [
        Edit(kind="append", text="- s1", source="success"),
        Edit(kind="append", text="- f2", source="success"),  # same edit as a failure one: duplicate
        Edit(kind="delete", target="rule one", source="success"),  # same region as the first edit
        Edit(kind="append", text="- s3", source="success"),
        Edit(kind="append", text="- s4", source="success"),
    ]
    pool, dropped = merge_patches(f, s, DOC)  # not clipped here: ranking comes first (rank_and_clip)
    assert [e.text for e in pool] == ["- a", "- f2", "- s1", "- s3", "- s4"]
    assert [e.source for e in pool] == ["failure", "failure", "success", "success", "success"]
    assert sorted(d["status"] for d in dropped) == ["dropped_duplicate", "dropped_region_conflict"]


def _settings(**skillopt_params) -> config_mod.MethodSettings:
    params = {"initial_skill": DOC, "protected": list(PROTECTED), **skillopt_params}
    return config_mod.method_settings(config_mod.from_dict({"methods_params": {"skillopt": params}}))


def _run_with_scores(monkeypatch, scores, replies, batch_size=2):
    """Run the optimiser with a scripted optimizer and gate scores given per distinct skill text."""
    settings = _settings(batch_size=batch_size)
    by_text: dict[str, float] = {}

    async def fake_gate(settings_, episodes, lineage, skill, instances):
        if skill not in by_text:
            by_text[skill] = scores[len(by_text)]
        return skillopt.GateScore(by_text[skill], 0, 1, 0)

    monkeypatch.setattr(skillopt, "gate_score", fake_gate)
    labelled = [(make_rollout(f"user_task_{i}", "v0", False), False) for i in range(4)]
    return asyncio.run(skillopt.optimise(settings, "L1", labelled, [], ScriptedBackend(replies), None))


def test_gate_accepts_only_a_strictly_better_candidate(monkeypatch):
    replies = [json.dumps({"edits": [{"kind": "append", "text": f"- lesson {i}"}]}) for i in range(2)]
    # initial 0.5; first candidate ties (rejected); second candidate 0.75 (accepted)
    skill, diag = _run_with_scores(monkeypatch, [0.5, 0.5, 0.75], replies)
    decisions = [u["decision"] for u in diag["updates"]]
    assert decisions == ["rejected", "accepted"]
    assert "- lesson 0" not in skill and "- lesson 1" in skill
    assert diag["gate_initial"]["score"] == 0.5 and diag["gate_final"]["score"] == 0.75
    assert diag["updates"][0]["gate_candidate"]["score"] == diag["updates"][0]["gate_current"]["score"]
    assert all(e["status"] == "applied" for u in diag["updates"] for e in u["edits"])


def test_a_worse_candidate_is_rejected_and_the_deployed_skill_is_unchanged(monkeypatch):
    replies = [json.dumps({"edits": [{"kind": "append", "text": "- worse"}]})]
    skill, diag = _run_with_scores(monkeypatch, [0.5, 0.25, 0.25], replies, batch_size=4)
    assert skill == DOC and [u["decision"] for u in diag["updates"]] == ["rejected"]


def test_malformed_optimizer_output_is_a_failed_update_not_a_crash(monkeypatch):
    skill, diag = _run_with_scores(monkeypatch, [0.5, 0.9], ["{broken", '{"edits": [{"kind": "zap"}]}'])
    assert skill == DOC
    assert [u["decision"] for u in diag["updates"]] == ["failed_update", "failed_update"]
    assert diag["n_failed_updates"] == 2
    assert all(len(c["attempts"]) == 3 for u in diag["updates"] for c in u["calls"])


def test_protected_region_must_occur_in_the_initial_skill(monkeypatch):
    cfg = config_mod.from_dict({"methods_params": {"skillopt": {"protected": ["# Not there"]}}})
    settings = config_mod.method_settings(cfg)
    with pytest.raises(ValueError, match="protected"):
        asyncio.run(skillopt.optimise(settings, "L1", [], [], ScriptedBackend(["{}"]), None))


class _Episodes:
    """An episode runner that records what the gate asks and answers with fixed utilities."""

    def __init__(self, answers, variants=("v1",)):
        self.answers, self.validation_variants, self.asked = answers, variants, []

    async def utilities(self, sections, instances, seeds):
        self.asked.append((sections, [i.instance_id for i in instances], seeds))
        return list(self.answers)

    def fingerprint(self):
        return {"backend": "fake-executor"}


def _instance(instance_id, variant, split="seen"):
    return SimpleNamespace(instance_id=instance_id, variant=variant, split=split)


def test_the_gate_runs_the_skill_as_sections_with_one_seed_per_instance_and_skips_infra_failures():
    settings = _settings()
    episodes = _Episodes([True, None, False])
    instances = [_instance(f"i{n}", "v1") for n in range(3)]
    score = asyncio.run(skillopt.gate_score(settings, episodes, "L1", DOC, instances))
    assert (score.score, score.successes, score.scored, score.infra_failures) == (0.5, 1, 2, 1)
    ((sections, ids, seeds),) = episodes.asked
    assert sections == skillopt.skill_sections(DOC) and ids == ["i0", "i1", "i2"]
    assert seeds == [derive_seed(settings.seed, "L1", f"i{n}", None, "gate") for n in range(3)]


def test_skillopt_gates_on_the_runners_validation_variants_of_seen_families(monkeypatch):
    seen: dict = {}

    async def fake_optimise(settings, lineage, labelled, validation, optimizer, episodes, start=None):
        seen["validation"] = [i.instance_id for i in validation]
        return DOC, {}

    monkeypatch.setattr(skillopt, "optimise", fake_optimise)
    learning = [
        _instance("b", "v1"),
        _instance("a", "v1"),
        _instance("c", "v0"),
        _instance("d", "v1", "unseen"),
    ]
    inputs = EvolveInputs(_settings(), "L1", [], "checker", learning, None, episodes=_Episodes([]))
    state, diag = asyncio.run(skillopt.SKILLOPT.evolve(inputs))
    assert seen["validation"] == ["a", "b"] and diag["executor"] == {"backend": "fake-executor"}
    with pytest.raises(ValueError, match=r"roles.validation=\['v5'\]"):
        asyncio.run(skillopt.SKILLOPT.evolve(replace(inputs, episodes=_Episodes([], ("v5",)))))
    with pytest.raises(ValueError, match="no episode runner"):
        asyncio.run(skillopt.SKILLOPT.evolve(replace(inputs, episodes=None)))
