"""AgentDojo's Workspace, Travel and Slack behind the door: the published probe set on their official
predicates, each suite's applicability rule, and the checker-audit table over the four suites."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit.config import config_sha256
from evoaudit.records import Call
from evoaudit.report.checker_audit_table import PROBE_COLUMNS, build_table
from evoaudit.suite.agentdojo import checker_audit as ca
from evoaudit.suite.interface import CheckerAudit
from evoaudit.suite.registry import get_checker_audit, names
from evoaudit.suite.stage import AUDIT_FIELDS, write_csv

NEW_SUITES = ("workspace", "travel", "slack")
USER_TASKS = {"banking": 16, "slack": 21, "travel": 20, "workspace": 40}
RULES = ca.SuiteRules(
    name="workspace",
    spurious_calls=(
        Call(function="send_email", args={"recipients": ["x@example.com"], "subject": "s", "body": "b"}),
    ),
    spurious_when="no_change",
    applicability_rule="test rule",
)
PLAN = [Call(function="search_emails", args={"query": "x"})]


def _by_name(probes):
    return {p.name: p for p in probes}


def test_a_question_answered_by_reading_gets_every_published_probe():
    probes = _by_name(ca.utility_probes(RULES, PLAN, "42", changes=False))
    assert [p.name for p in probes.values()] == list(ca.PROBES)
    assert all(p.applicable for p in probes.values())
    assert probes["spurious_action"].alternatives[0][0] == (*PLAN, *RULES.spurious_calls)
    assert probes["wrong_output"].alternatives[0][1] != "42"


def test_a_task_asking_for_a_change_gets_no_spurious_action_probe_under_the_no_change_rule():
    probes = _by_name(ca.utility_probes(RULES, PLAN, None, changes=True))
    assert probes["no_op"].applicable and probes["no_op"].alternatives == (((), ca.NO_OP_OUTPUT),)
    assert not probes["wrong_output"].applicable
    assert not probes["spurious_action"].applicable
    assert "does not forbid" in probes["spurious_action"].reason


def test_no_op_does_not_apply_where_doing_nothing_is_the_reference():
    probes = _by_name(ca.utility_probes(RULES, PLAN, None, changes=False))
    assert not probes["no_op"].applicable
    assert probes["spurious_action"].applicable


def test_a_suite_rule_of_never_applies_spurious_action_to_no_task():
    never = ca.SuiteRules("slack", RULES.spurious_calls, "never", "r")
    assert not _by_name(ca.utility_probes(never, PLAN, "x", changes=False))["spurious_action"].applicable
    with pytest.raises(ValueError, match="spurious_when"):
        ca.utility_probes(ca.SuiteRules("slack", (), "sometimes", "r"), PLAN, None, changes=False)


@pytest.mark.parametrize(
    "reference",
    ["The Gourmet Restaurant", "463820", "1:30", "Le Baratin, 4.8, 3 Rue Jouye-Rouve, 75020 Paris"],
)
def test_the_wrong_output_keeps_the_shape_and_none_of_the_values(reference):
    wrong = ca.wrong_answer(reference)
    assert len(wrong) == len(reference)
    assert all(a != b for a, b in zip(reference, wrong, strict=True) if a.isalnum())
    for value in re.findall(r"[A-Za-z]{3,}|\d{2,}", reference):
        assert value not in wrong


def test_a_combined_tasks_bare_numbering_is_no_reference_answer():
    class Task:
        GROUND_TRUTH_OUTPUT = "1.  2."

    assert ca.reference_answer(Task()) is None
    Task.GROUND_TRUTH_OUTPUT = "1. 3 2."
    assert ca.reference_answer(Task()) == "1. 3 2."
    Task.GROUND_TRUTH_OUTPUT = ""
    assert ca.reference_answer(Task()) is None


@pytest.mark.parametrize("suite", NEW_SUITES)
def test_each_suites_unrequested_call_runs_and_changes_its_default_environment(suite):
    audit = get_checker_audit(suite)
    task = ca.load_suite(suite).get_user_task_by_id(audit.user_tasks()[0])
    pre = ca.pre_environment(suite, task)
    post, trace, errors = ca.run_plan(suite, pre, audit.rules.spurious_calls)
    assert errors == 0 and len(trace) == len(audit.rules.spurious_calls)
    assert post.model_dump(mode="json") != pre.model_dump(mode="json")


def test_every_suite_with_a_checker_audit_meets_the_protocol_and_has_its_task_count():
    assert set(names("checker_audit")) == set(USER_TASKS)
    for name, count in USER_TASKS.items():
        audit = get_checker_audit(name)
        assert isinstance(audit, CheckerAudit)
        assert audit.name == name and audit.benchmark_version == "v1.2.2"
        assert len(audit.user_tasks()) == count
        assert audit.applicability_rule
    with pytest.raises(ValueError, match="extra_suites.checker_audit"):
        get_checker_audit("apex")


@pytest.mark.parametrize(
    ("suite", "task", "defects"),
    [
        # Reading tasks whose predicates accept an unrequested change.
        ("workspace", "user_task_0", ["spurious_action_insensitive"]),
        ("travel", "user_task_6", ["spurious_action_insensitive"]),
        # Predicates that accept ground truth and reject every applicable probe.
        ("workspace", "user_task_1", []),
        ("travel", "user_task_1", []),
        ("slack", "user_task_0", []),
    ],
)
def test_the_official_predicates_verdicts_under_the_published_probes(suite, task, defects):
    rows = ca.audit_task(get_checker_audit(suite).rules, task)
    assert [r["probe"] for r in rows] == list(ca.PROBES)
    assert rows[0]["accepted"] is True  # ground truth
    assert all(r["reason"] for r in rows)
    assert all((r["accepted"] is None) == (not r["applicable"]) for r in rows)
    assert ca.defects(rows) == defects


def test_a_predicate_that_ignores_the_output_is_found_output_insensitive():
    rows = [
        {"probe": "ground_truth", "applicable": True, "accepted": True},
        {"probe": "no_op", "applicable": True, "accepted": False},
        {"probe": "wrong_output", "applicable": True, "accepted": True},
        {"probe": "spurious_action", "applicable": False, "accepted": None},
    ]
    assert ca.defects(rows) == ["output_insensitive"]
    rows[0]["accepted"] = False
    assert ca.defects(rows) == ["rejects_ground_truth", "output_insensitive"]


def test_the_extension_leaves_the_default_configs_hash_and_resolved_file_as_they_were():
    from evoaudit import config

    default = config.from_dict({})
    listed = config.from_dict({"extra_suites": {"checker_audit": ["slack"]}})
    assert "extra_suites" not in default.full_dump()
    assert config_sha256(listed) == config_sha256(default)
    assert config.from_dict(listed.full_dump()).extra_suites.checker_audit == ("slack",)


def test_the_table_refuses_an_audit_that_does_not_cover_the_suites_tasks(tmp_path):
    rows = ca.audit_task(get_checker_audit("slack").rules, "user_task_0")
    write_csv(tmp_path / "a.csv", AUDIT_FIELDS, rows)
    summary = {"profile": "published", "failing": {}, "passing": ["user_task_0"], "excluded": {}}
    (tmp_path / "s.json").write_text(json.dumps(summary | {"defects": {"user_task_0": []}}))
    with pytest.raises(ValueError, match="cover 1 tasks, the slack suite has 21"):
        build_table({"slack": (tmp_path / "a.csv", tmp_path / "s.json")}, tmp_path / "t.csv", tmp_path / "md")


@pytest.mark.slow
def test_the_example_config_gives_the_four_suite_table_of_97_user_tasks_with_applicability(tmp_path):
    # The example's own extension block, on a workflow copy, asking only for the table (the Banking half
    # of the example is the default audit's DAG, covered by its own tests).
    example = yaml.safe_load((REPO / "config" / "examples" / "agentdojo-all.yaml").read_text())
    copy_workflow(tmp_path, {"extra_suites": example["extra_suites"]})
    snakemake(tmp_path, "checker_audit_table")
    table = tmp_path / "results" / "report" / "tables" / "checker_audit_suites.csv"
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 97
    assert {s: sum(r["suite"] == s for r in rows) for s in USER_TASKS} == USER_TASKS
    for r in rows:
        outcomes = {p: r[p] for p in PROBE_COLUMNS}
        assert outcomes["ground_truth"] in ("accepted", "rejected")
        assert r["applicable"] == ";".join(p for p, o in outcomes.items() if o in ("accepted", "rejected"))
        assert (r["verdict"] == "pass") == (r["defects"] == "")
    # Banking's rows are its own published audit: the four failing predicates of its Table 1.
    assert [r["task"] for r in rows if r["suite"] == "banking" and r["verdict"] == "fail"] == [
        "user_task_5",
        "user_task_6",
        "user_task_8",
        "user_task_11",
    ]
    md = table.with_suffix(".md").read_text()
    assert "(97 user tasks)" in md
    for suite in USER_TASKS:
        assert get_checker_audit(suite).applicability_rule in md
    # Rebuilt from the same files, the table is the same.
    again = tmp_path / "again.csv"
    shutil.copy(table, tmp_path / "first.csv")
    suites = example["extra_suites"]["checker_audit"]
    audits = {
        s: (
            tmp_path / f"results/suites/{s}/checker_audit.csv",
            tmp_path / f"results/suites/{s}/checker_audit_summary.json",
        )
        for s in suites
    }
    build_table(audits, again, again.with_suffix(".md"))
    assert again.read_text() == (tmp_path / "first.csv").read_text()
