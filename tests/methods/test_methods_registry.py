"""The method registry: one ``Method`` per name the config accepts, each answering the questions the evolve
stage used to ask by name."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from evoaudit import config as config_mod
from evoaudit.methods.registry import METHODS, get_method


def test_registry_holds_exactly_the_methods_the_config_schema_accepts():
    schema = yaml.safe_load(resources.files("evoaudit").joinpath("config.schema.yaml").read_text())
    assert set(METHODS) == set(schema["properties"]["methods"]["items"]["enum"])
    assert all(get_method(name).name == name for name in METHODS)


def test_an_unknown_method_is_refused_with_the_known_names():
    known = "static, skillopt, awm, reasoningbank"
    with pytest.raises(ValueError, match=f"unknown method 'dspy'; known: {known}"):
        get_method("dspy")


def test_only_the_static_identity_does_not_learn():
    assert [name for name in METHODS if not get_method(name).learns] == ["static"]


def test_reasoningbank_reads_its_own_success_label_key_and_the_others_the_shared_one():
    cfg = config_mod.from_dict(
        {"methods_params": {"success_label": "checker", "reasoningbank": {"success_label": "judge"}}}
    )
    labels = {name: get_method(name).success_label(cfg) for name in METHODS}
    assert labels == {"static": "checker", "skillopt": "checker", "awm": "checker", "reasoningbank": "judge"}
