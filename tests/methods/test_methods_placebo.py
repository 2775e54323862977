"""Placebos: same structure and position as the real state, task-irrelevant content, recorded length
ratio; and how every condition enters the system prompt."""

from __future__ import annotations

import json

import pytest
from test_methods_awm import LITERAL
from test_methods_reasoningbank import _bank_dir

from evoaudit.methods import awm, reasoningbank, skillopt
from evoaudit.methods.artifact import ArtifactMeta, read_meta, write_artifact
from evoaudit.methods.conditions import Insertion, condition, prompt_sections
from evoaudit.methods.placebo import make_placebo
from evoaudit.suite.agentdojo.banking import tasks as banking

SKILL = (
    "# Banking task skill\n\nNotes for carrying out banking requests with the available tools.\n"
    "## Lessons from failed requests\n- Before sending money, look up the recent transaction history and "
    "take amounts, recipients and dates from what you found.\n- Compare every amount with the history.\n"
)
TOOLS = sorted(banking.READ_ONLY_TOOLS | {"send_money", "update_password", "schedule_transaction"})


def _real(tmp_path, method, state):
    out = tmp_path / method
    write_artifact(out, ArtifactMeta(method=method, lineage="L1", state_files=sorted(state)), state)
    return out


def _assert_irrelevant(text: str):
    for tool in TOOLS:
        assert tool not in text
    for word in ("history", "transaction", "amount", "recipient", "password"):
        assert word not in text.lower()


def test_skillopt_placebo_keeps_the_document_shape_and_records_its_length_ratio(tmp_path):
    real = _real(tmp_path, "skillopt", {skillopt.STATE_FILE: SKILL})
    info = make_placebo(1, "L1", "skillopt", real, tmp_path / "placebo-skillopt")
    fake = (tmp_path / "placebo-skillopt" / skillopt.STATE_FILE).read_text()
    assert fake.startswith("# Banking task skill\n\n- ")
    _assert_irrelevant(fake.removeprefix("# Banking task skill"))
    assert info["length_ratio"] == len(fake) / len(SKILL)
    assert 0.9 <= info["length_ratio"] <= 1.1
    meta = read_meta(tmp_path / "placebo-skillopt")
    assert meta.method == "placebo-skillopt" and meta.diagnostics["length_ratio"] == info["length_ratio"]
    # Same insertion position as the real skill: one "## Skill" section.
    placebo_sections = prompt_sections(condition("placebo-skillopt"), tmp_path / "placebo-skillopt")
    real_sections = prompt_sections(condition("skillopt"), real)
    assert [h for h, _ in placebo_sections] == [h for h, _ in real_sections] == ["Skill"]


def test_awm_placebo_is_generic_prose_without_the_think_action_envelope(tmp_path):
    real = _real(tmp_path, "awm", {awm.STATE_FILE: LITERAL})
    info = make_placebo(1, "L1", "awm", real, tmp_path / "placebo-awm")
    fake = (tmp_path / "placebo-awm" / awm.STATE_FILE).read_text()
    # No envelope and nothing that reads as a call: the placebo emits no textual actions of its own.
    assert not any(tag in fake for tag in awm.TAGS) and "(" not in fake
    assert awm.steps(fake) == [] and info["steps_placebo"] == info["envelope_tags"] == 0
    assert info["steps_real"] == len(awm.steps(LITERAL)) == 3
    assert fake.count("\n## ") + fake.startswith("## ") == 1  # one section per workflow
    _assert_irrelevant(fake)
    # The length ratio is recorded and stays near 1.
    assert info["length_ratio"] == len(fake) / len(LITERAL) and 0.85 <= info["length_ratio"] <= 1.15


def test_reasoningbank_placebo_retrieves_the_same_task_with_neutral_items(tmp_path):
    real = _bank_dir(tmp_path)
    info = make_placebo(1, "L1", "reasoningbank", real, tmp_path / "placebo-reasoningbank")
    real_bank = reasoningbank.Retriever(real)
    fake_bank = reasoningbank.Retriever(tmp_path / "placebo-reasoningbank")
    for query in ("pay the landlord the rent", "a new password please"):
        (r_entry, _), (f_entry, _) = real_bank.retrieve(query)[0], fake_bank.retrieve(query)[0]
        assert r_entry.entry_id == f_entry.entry_id and len(r_entry.items) == len(f_entry.items)
        assert [i.provenance for i in r_entry.items] == [i.provenance for i in f_entry.items]
        _assert_irrelevant(json.dumps([i.model_dump() for i in f_entry.items]))
    assert info["length_ratio"] == info["placebo_chars"] / info["real_chars"]
    assert 0.8 <= info["length_ratio"] <= 1.25


def test_placebo_is_deterministic_for_a_seed_and_lineage(tmp_path):
    real = _real(tmp_path, "skillopt", {skillopt.STATE_FILE: SKILL})
    make_placebo(3, "L1", "skillopt", real, tmp_path / "p1")
    make_placebo(3, "L1", "skillopt", real, tmp_path / "p2")
    assert (tmp_path / "p1" / skillopt.STATE_FILE).read_text() == (
        tmp_path / "p2" / skillopt.STATE_FILE
    ).read_text()


def test_awm_conditions_deploy_one_artifact_with_two_transforms(tmp_path):
    real = _real(tmp_path, "awm", {awm.STATE_FILE: LITERAL})
    literal = Insertion(condition("awm-literal"), real).sections()
    adapted = Insertion(condition("awm-adapted"), real).sections()
    assert literal == [("Workflows", LITERAL)]
    assert adapted == [("Workflows", awm.strip_tags(LITERAL))]
    assert condition("awm-literal").method == condition("awm-adapted").method == "awm"
    assert condition("placebo-awm").method == "placebo-awm" and condition("placebo-awm").is_placebo


def test_insertion_refuses_an_artifact_of_another_method(tmp_path):
    real = _real(tmp_path, "awm", {awm.STATE_FILE: LITERAL})
    with pytest.raises(ValueError, match="deploys 'skillopt'"):
        Insertion(condition("skillopt"), real)


def test_static_inserts_nothing(tmp_path):
    real = _real(tmp_path, "static", {})
    assert Insertion(condition("static"), real).sections() == []
