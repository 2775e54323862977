"""The configuration is defined once, by the pydantic models in evoaudit.config (keys, kinds, allowed values,
defaults, and the docstring under each field as its description); the JSON schema that validation applies
and whose defaults it fills (src/evoaudit/config.schema.yaml, linked from workflow/schemas/) is generated from
them by ``python -m evoaudit.config_schema``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from evoaudit import config as config_mod
from evoaudit import config_schema
from evoaudit.config import checks as config_checks

REPO = Path(__file__).resolve().parents[2]


def test_the_checked_in_schema_is_what_the_models_generate():
    written = config_schema.SCHEMA_PATH.read_text(encoding="utf-8")
    assert written == config_schema.render(), (
        f"{config_schema.SCHEMA_PATH} is out of date with the models in evoaudit.config; "
        f"run `{config_schema.REGENERATE}` and commit the result"
    )


def test_the_workflow_schema_is_the_package_schema():
    workflow_schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    assert workflow_schema.read_text(encoding="utf-8") == config_schema.SCHEMA_PATH.read_text(
        encoding="utf-8"
    )


def test_the_check_names_the_command_when_the_file_is_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "config.schema.yaml"
    stale.write_text(config_schema.render().replace("default: 20261130", "default: 1"), encoding="utf-8")
    monkeypatch.setattr(config_schema, "SCHEMA_PATH", stale)
    assert config_schema.main(["--check"]) == 1
    assert "run `python -m evoaudit.config_schema`" in capsys.readouterr().out
    assert config_schema.main([]) == 0  # rewrites it
    assert config_schema.main(["--check"]) == 0


def test_the_models_defaults_are_the_defaults_validation_fills():
    # Config() takes every model default; validating {} takes every schema default. Validation derives
    # apex.out (<results_dir>/suite/apex) and what the audited suite names (its briefing and skill seed).
    from_models = config_mod.Config().full_dump()
    from_models["suite"]["apex"]["out"] = "results/suite/apex"
    assert from_models["agent"]["system_prompt"] is None
    from_models["agent"]["system_prompt"] = (
        "You are a careful banking assistant. Use the available tools to carry out the user's request and "
        "answer with a short final message when done."
    )
    skillopt = from_models["methods_params"]["skillopt"]
    assert skillopt["initial_skill"] is None and skillopt["protected"] is None
    skillopt["initial_skill"] = (
        "# Banking task skill\n\nNotes for carrying out banking requests with the available tools.\n"
    )
    skillopt["protected"] = ["# Banking task skill"]
    assert from_models == config_mod.from_dict({}).full_dump()


def _properties(node: dict[str, Any], where: str):
    for name, sub in node.get("properties", {}).items():
        yield f"{where}{name}", sub
        yield from _properties(sub, f"{where}{name}.")
    for key, suffix in (("items", "[]."), ("additionalProperties", ".*.")):
        if isinstance(node.get(key), dict):
            yield from _properties(node[key], f"{where.rstrip('.')}{suffix}")


def test_every_key_of_the_configuration_is_described():
    undescribed = [where for where, sub in _properties(config_mod.schema(), "") if not sub.get("description")]
    assert undescribed == []


def test_each_role_keeps_its_own_endpoint_defaults():
    props = config_mod.schema()["properties"]
    assert props["optimizer"]["properties"]["temperature"]["default"] == 1.0
    assert props["executor"]["properties"]["temperature"]["default"] == 0.0
    assert props["apex"]["properties"]["judge"]["default"] == {"model": "evoaudit-sim-judge"}
    filled = config_mod.from_dict({"optimizer": {"model": "m"}, "apex": {"judge": {"temperature": 0.5}}})
    assert filled.optimizer.temperature == 1.0
    assert filled.apex.judge.model == "evoaudit-sim"  # a block written out takes the endpoint's default model


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["a", "b"] | None = "a"
    """the mode"""
    size: int = Field(3, ge=1)
    """the size"""


class _Outer(BaseModel):
    """the outer"""

    model_config = ConfigDict(extra="forbid")

    inner: _Inner = Field(default_factory=_Inner)
    """the inner section"""
    shares: dict[str, float] = Field(default_factory=dict)
    """per-name shares"""
    kind: Literal["only"] = "only"
    """the one kind"""


def test_the_generator_writes_what_default_filling_and_the_error_messages_need(monkeypatch):
    monkeypatch.setattr(config_schema, "Config", _Outer)
    schema = config_schema.generate()
    inner = schema["properties"]["inner"]
    assert "$defs" not in schema and "$ref" not in json.dumps(schema)  # inlined: defaults sit in place
    assert inner["default"] == {} and inner["additionalProperties"] is False
    assert inner["description"] == "the inner section"
    assert inner["properties"]["mode"] == {
        "type": ["string", "null"],
        "enum": ["a", "b", None],
        "default": "a",
        "description": "the mode",
    }
    assert schema["properties"]["kind"]["enum"] == ["only"]
    assert "title" not in json.dumps(schema["properties"])
    data: dict[str, Any] = {}
    config_checks._Validator(schema).validate(data)
    assert data == {"inner": {"mode": "a", "size": 3}, "shares": {}, "kind": "only"}


def _configs() -> list[tuple[str, dict[str, Any]]]:
    from snakemake.utils import update_config

    base = config_mod.read_config_file(REPO / "config" / "config.yaml")
    out = [("config.yaml", base)]
    for path in sorted((REPO / "config" / "examples").glob("*.yaml")):
        merged = copy.deepcopy(base)
        update_config(merged, config_mod.read_config_file(path))
        out.append((path.name, merged))
    return out


def test_snakemakes_validate_fills_the_same_defaults_for_every_shipped_configuration():
    from snakemake.utils import validate

    schema_file = REPO / "workflow" / "schemas" / "config.schema.yaml"
    for name, raw in _configs():
        by_snakemake = copy.deepcopy(raw)
        validate(by_snakemake, str(schema_file))
        ours = copy.deepcopy(raw)
        config_checks._raise_schema_errors(ours, name, ())
        assert json.dumps(by_snakemake, sort_keys=True) == json.dumps(ours, sort_keys=True), name
        assert by_snakemake["optimizer"]["temperature"] == raw.get("optimizer", {}).get("temperature", 1.0)


@pytest.mark.parametrize("key", ["seed", "suite", "endpoints"])
def test_the_schema_file_is_plain_yaml_with_its_provenance_in_the_header(key):
    text = config_schema.SCHEMA_PATH.read_text(encoding="utf-8")
    assert text.startswith("# Generated from the pydantic models in src/evoaudit/config/model.py")
    assert key in yaml.safe_load(text)["properties"]
