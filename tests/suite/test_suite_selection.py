"""A reduced run: suite.families and apex.tasks select what the suite door lists, and everything that
enumerates families or tasks (instances, the plan, the APEX worlds and attack counts) follows it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evoaudit import config as config_mod
from evoaudit.config import ConfigError, suite_view
from evoaudit.ops.apex import plan as apex_plan
from evoaudit.ops.plan import _family_counts
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.interface import select_ids
from evoaudit.suite.registry import check_selection, get_suite
from evoaudit.suite.split import assign_split

ROOT = Path(__file__).resolve().parents[2]


def load(raw: dict, source: str = "mine.yaml") -> config_mod.Config:
    """What the workflow and the `evoaudit` commands do with a configuration: validate, then check the
    selection against the suites."""
    cfg = config_mod.from_dict(raw, source)
    check_selection(cfg, source)
    return cfg


def test_select_ids_keeps_the_suites_order_and_names_the_field_and_valid_ids():
    assert select_ids(["a", "b", "c"], None, "f") == ["a", "b", "c"]
    assert select_ids(["a", "b", "c"], ["c", "a"], "f") == ["a", "c"]
    with pytest.raises(ValueError) as err:
        select_ids(["a", "b"], ["b", "x"], "suite.families", {"x": "vacuous"})
    text = str(err.value)
    assert "suite.families" in text and "['x']" in text and "x is excluded: vacuous" in text
    assert "valid ids: a, b" in text


def test_an_unknown_or_excluded_family_stops_the_config_naming_file_field_and_valid_ids():
    with pytest.raises(ConfigError) as err:
        load({"suite": {"families": ["user_task_0", "user_task_8"]}})
    text = str(err.value)
    assert text.startswith("mine.yaml: suite.families:")
    assert "user_task_8 is excluded" in text and "valid ids: user_task_0, user_task_1" in text


def test_an_unknown_apex_task_stops_the_config_listing_the_tasks():
    want = r"mine.yaml: apex.tasks: \['ib_nope'\].*valid ids: ib_comps_median"
    with pytest.raises(ConfigError, match=want):
        load({"apex": {"tasks": ["ib_wacc", "ib_nope"]}})


def test_a_selection_of_unseen_families_only_is_refused_naming_the_seen_ones():
    split = assign_split(get_suite("banking").families(), 4).split
    unseen = [f for f, s in split.items() if s == "unseen"]
    with pytest.raises(ConfigError, match=r"suite.families: .* all unseen .*add a seen one: user_task_0"):
        load({"suite": {"families": unseen[:2]}})


def test_suite_families_is_for_banking_and_points_apex_runs_at_apex_tasks():
    raw = {
        "suite": {"name": "apex", "families": ["user_task_0"], "goals": ["c1"]},
        "methods_params": {"placebo": {"goals": ["c1"]}},
        "transfer": {"enabled": False},
    }
    with pytest.raises(ConfigError, match=r"suite.families: .*choose the APEX tasks with apex.tasks"):
        load(raw)


def test_instances_and_the_plan_follow_the_selection_with_the_split_of_all_families():
    chosen = ["user_task_0", "user_task_13"]
    cfg = load({"suite": {"families": list(reversed(chosen))}})
    suite = get_suite("banking")
    assert suite.families(suite_view(cfg)) == chosen
    assert len(suite.families()) == 15
    instances = build_instances(cfg)
    assert sorted({i.family for i in instances}) == chosen
    full_split = assign_split(suite.families(), cfg.suite.n_unseen).split
    assert {i.family: i.split for i in instances} == {f: full_split[f] for f in chosen}
    by_variant_split, _ = _family_counts(cfg)
    assert by_variant_split[("v0", "seen")] == 1 and by_variant_split[("v0", "unseen")] == 1


def test_apex_tasks_select_the_suites_families_and_scale_the_planned_attacks(tmp_path):
    raw = {
        "apex": {"tasks": ["law_nda_terms", "ib_wacc"], "categories": ["c1", "c4"]},
        "suite": {"apex": {"out": str(tmp_path / "apex")}},
    }
    cfg = load(raw)
    assert get_suite("apex").families(suite_view(cfg)) == ["ib_wacc", "law_nda_terms"]
    assert len(get_suite("apex").families()) == 15
    counts, source = apex_plan.attack_counts(cfg)
    assert counts == {"c1": 4, "c4": 4} and "not built" in source  # 2 per task; c4perm + c4noperm
    arms = apex_plan._arms(cfg)
    assert arms[0][3][0] == ("benign", 2)


def test_validate_config_refuses_an_unknown_family_naming_the_file(tmp_path, capsys):
    from evoaudit.cli import main

    path = tmp_path / "reduced.yaml"
    path.write_text("suite: {families: [user_task_99]}\n")
    assert main(["validate-config", "--config", str(path)]) == 2
    assert f"{path}: suite.families: ['user_task_99']" in capsys.readouterr().err


def test_local_qwen_example_puts_every_role_on_the_local_server():
    path = ROOT / "config" / "examples" / "local-qwen.yaml"
    cfg = load(yaml.safe_load(path.read_text()), str(path))
    base = "http://127.0.0.1:8089/v1"
    roles = {
        "executor": cfg.executor,
        "optimizer": cfg.optimizer,
        "apex.judge": cfg.apex.judge,
        "suite.apex.attacker": cfg.suite.apex.attacker,
    }
    roles.update({f"apex.models.{m.id}": m.executor for m in cfg.apex.models})
    assert {k: (e.backend, e.base_url) for k, e in roles.items()} == {k: ("openai", base) for k in roles}
    assert cfg.executor.wire.parse_text_tool_calls and all(
        m.executor.wire.parse_text_tool_calls for m in cfg.apex.models
    )
    assert len({e.concurrency for e in roles.values()}) == 1  # one value: the server's slots
    assert cfg.lineages == ("L1",) and len(cfg.suite.goals) == 1 and len(cfg.apex.tasks) == 2
    assert not cfg.transfer.enabled
    split = assign_split(get_suite("banking").families(), cfg.suite.n_unseen).split
    assert {split[f] for f in cfg.suite.families} == {"seen", "unseen"}


def test_the_instances_stage_writes_a_spec_of_the_selected_families(tmp_path):
    from evoaudit.suite.stage import make_instances, run_checker_audit

    cfg = load({"suite": {"families": ["user_task_5", "user_task_0"]}})
    summary = tmp_path / "summary.json"
    run_checker_audit(cfg, tmp_path / "audit.csv", summary)  # the checker audit still probes every family
    spec = make_instances(cfg, summary, tmp_path / "instances.parquet", tmp_path / "suite_spec.json")
    assert spec["families"] == ["user_task_0", "user_task_5"]
    assert set(spec["corrections"]) == set(spec["split"]) == {"user_task_0", "user_task_5"}
    assert spec["official_unchanged"] == ["user_task_0"]  # user task 5 is repaired


def test_the_instance_stage_names_a_missing_input_and_how_to_make_it(tmp_path):
    from evoaudit.errors import AuditError
    from evoaudit.suite.stage import make_instances

    cfg = config_mod.from_dict({})
    with pytest.raises(AuditError, match=r"no checker-audit summary there; run the checker audit first"):
        make_instances(cfg, tmp_path / "none.json", tmp_path / "t.parquet", tmp_path / "s.json")
    summary = tmp_path / "summary.json"
    summary.write_text("{}")
    with pytest.raises(AuditError, match=r"apex_spec .*missing.json; build them first .*apex_worlds"):
        make_instances(
            cfg,
            summary,
            tmp_path / "t.parquet",
            tmp_path / "s.json",
            {"apex_spec": tmp_path / "missing.json"},
        )
