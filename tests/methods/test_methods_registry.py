"""The method registry: every method, evoaudit's own included, is an entry point of the group
``evoaudit.methods``; the config accepts any installed name and names the installed ones when a name is not;
each method answers the questions the stages used to ask by name."""

from __future__ import annotations

import dataclasses
import inspect
import tomllib
from importlib import resources
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from evoaudit import config as config_mod
from evoaudit import method_plugins
from evoaudit.methods.conditions import check_conditions, condition
from evoaudit.methods.protocol import EvolveInputs, MethodBase
from evoaudit.methods.registry import get_method, installed

BUILT_IN = ("static", "skillopt", "awm", "reasoningbank", "ace", "dc-cu", "dc-rs")


class Toy(MethodBase):
    """A method known only to this test (registered through a patched entry point list)."""

    name = "toy"
    state_file = "toy.md"
    section = "Toy notes"
    insertions = {"toy": "literal", "toy-twice": "twice"}

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict]:
        return {"toy.md": "# Toy\n- one note\n"}, {}


@pytest.fixture
def toy_installed(monkeypatch):
    real = method_plugins._registered()
    toy = EntryPoint("toy", f"{__name__}:Toy", method_plugins.GROUP)
    monkeypatch.setattr(method_plugins, "_registered", lambda: {**real, "toy": toy})
    method_plugins.load.cache_clear()
    yield
    method_plugins.load.cache_clear()


def test_the_built_in_methods_are_entry_points_of_evoaudits_own_package():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert tuple(declared[method_plugins.GROUP]) == BUILT_IN
    assert installed()[: len(BUILT_IN)] == BUILT_IN
    for name in BUILT_IN:
        assert get_method(name).name == name
        assert method_plugins.package(name)["package"] == "evoaudit"


def test_the_schema_documents_the_plugin_point_instead_of_enumerating_methods():
    schema = yaml.safe_load(resources.files("evoaudit").joinpath("config.schema.yaml").read_text())
    for key in ("methods", "conditions"):
        items = schema["properties"][key]["items"]
        assert "enum" not in items
        assert "evoaudit.methods" in items["description"]


def test_an_unknown_method_is_refused_with_the_installed_names():
    with pytest.raises(
        ValueError, match="'dspy' is not an installed method; installed methods: static, skillopt, awm"
    ):
        get_method("dspy")


def test_the_config_refuses_an_unknown_method_naming_file_field_and_installed_methods(tmp_path: Path):
    path = tmp_path / "audit.yaml"
    path.write_text("methods: [static, skilopt]\nconditions: [static]\n")
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: methods: 'skilopt' is not an installed method")
    assert (
        "did you mean 'skillopt'?" in msg and "installed methods: static, skillopt, awm, reasoningbank" in msg
    )


def test_an_unknown_insertion_is_refused_where_a_run_starts_with_the_methods_conditions():
    # The config check, which every job runs, loads no method's code: an insertion is checked where the
    # workflow or a command starts (check_conditions), naming the source and the field.
    cfg = config_mod.from_dict({"methods": ["static", "awm"], "conditions": ["static", "awm-verbatim"]})
    with pytest.raises(
        config_mod.ConfigError, match=r"cfg.yaml: conditions: .*'awm-verbatim': method 'awm' has"
    ):
        check_conditions(cfg, "cfg.yaml")
    with pytest.raises(ValueError, match="'placebo-static': method 'static' deploys no state"):
        condition("placebo-static")
    with pytest.raises(ValueError, match="'awm': method 'awm' has the conditions"):
        condition("awm")


def test_an_installed_plugin_method_is_accepted_with_its_insertions_and_placebo(toy_installed):
    cfg = config_mod.from_dict(
        {"methods": ["static", "toy"], "conditions": ["static", "toy", "toy-twice", "placebo-toy"]}
    )
    assert cfg.methods == ("static", "toy")
    assert condition("toy-twice").method == "toy" and condition("toy-twice").transform == "twice"
    assert (
        condition("placebo-toy").method == "placebo-toy" and condition("placebo-toy").transform == "literal"
    )
    with pytest.raises(config_mod.ConfigError, match="method 'toy' has the conditions"):
        check_conditions(
            config_mod.from_dict({"methods": ["static", "toy"], "conditions": ["toy-thrice"]}), "c"
        )


def test_without_the_plugin_its_name_is_refused():
    with pytest.raises(config_mod.ConfigError, match="methods: 'toy' is not an installed method"):
        config_mod.from_dict({"methods": ["static", "toy"], "conditions": ["static"]})


def test_only_the_static_identity_does_not_learn():
    assert [name for name in installed() if not get_method(name).learns] == ["static"]


def test_reasoningbank_reads_its_own_success_label_key_and_the_others_the_shared_one():
    cfg = config_mod.from_dict(
        {"methods_params": {"success_label": "checker", "reasoningbank": {"success_label": "judge"}}}
    )
    labels = {name: get_method(name).success_label(cfg.methods_params) for name in BUILT_IN}
    assert labels == {
        "static": "checker",
        "skillopt": "checker",
        "awm": "checker",
        "reasoningbank": "judge",
        "ace": "checker",
        "dc-cu": "checker",
        "dc-rs": "checker",
    }


@pytest.mark.parametrize("name", BUILT_IN)
def test_no_method_hook_is_given_the_whole_config(name):
    """Each hook takes the section it reads (invariant 9): the ``methods_params`` section or the method's
    view, never ``Config``; and what an evolve job hands a method holds no ``Config`` either."""
    method = get_method(name)
    first = {
        hook: next(iter(inspect.signature(getattr(method, hook)).parameters.values())).annotation
        for hook in ("success_label", "check_budgets", "validation_rollouts")
    }
    assert first == {
        "success_label": "MethodsParams",
        "check_budgets": "MethodSettings",
        "validation_rollouts": "MethodsParams",
    }
    assert not [f.name for f in dataclasses.fields(EvolveInputs) if "Config" in str(f.type)]


def test_a_methods_settings_are_the_configurations_own_values():
    cfg = config_mod.from_dict({"seed": 7, "optimizer": {"max_tokens": 600, "concurrency": 3}})
    settings = config_mod.method_settings(cfg)
    assert settings.methods_params is cfg.methods_params
    assert (settings.seed, settings.suite_name) == (7, cfg.suite.name)
    assert (settings.optimizer_max_tokens, settings.optimizer_concurrency) == (600, 3)
