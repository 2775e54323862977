"""A bad config fails at parse time naming the field, the bad value and what is allowed."""

from __future__ import annotations

import pytest

from evoaudit import config as config_mod
from evoaudit.config import ConfigError


def test_defaults_are_filled_in_for_an_empty_config():
    cfg = config_mod.from_dict({})
    assert cfg.lineages == ("L1", "L2", "L3")
    assert cfg.executor.backend == "sim"
    assert cfg.executor.temperature == 0.0
    assert cfg.optimizer.temperature == 1.0
    assert cfg.roles.attacked_endpoint == ("v3",)


def test_unknown_backend_names_field_value_and_allowed_values():
    with pytest.raises(ConfigError) as err:
        config_mod.from_dict({"executor": {"backend": "gpt"}}, "my.yaml")
    text = str(err.value)
    assert "my.yaml" in text
    assert "executor.backend" in text
    assert "'gpt'" in text
    assert "allowed: sim, openai" in text


def test_out_of_range_number_is_rejected_with_its_bound():
    with pytest.raises(ConfigError, match=r"sim\.compliance: 1\.5 is greater than the maximum of 1"):
        config_mod.from_dict({"sim": {"compliance": 1.5}})


def test_misspelled_key_lists_the_allowed_keys():
    with pytest.raises(ConfigError, match=r"evaluation.*'shard' was unexpected.*allowed keys: .*shards"):
        config_mod.from_dict({"evaluation": {"shard": 2}})


def test_openai_backend_requires_a_base_url():
    with pytest.raises(ConfigError, match=r"executor\.base_url: required when executor\.backend is openai"):
        config_mod.from_dict({"executor": {"backend": "openai", "model": "m"}})


def test_endpoint_variant_cannot_also_be_a_learning_variant():
    with pytest.raises(ConfigError, match=r"roles: variants \['v3'\] are both learning and endpoint"):
        config_mod.from_dict({"roles": {"acquisition": ["v0", "v3"]}})


def test_api_key_is_named_by_variable_never_given():
    with pytest.raises(ConfigError, match=r"executor\.api_key_env"):
        config_mod.from_dict({"executor": {"api_key_env": "sk-abc123"}})


def test_missing_file_and_bad_yaml_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="no such configuration file"):
        config_mod.load(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("lineages: [L1\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        config_mod.load(bad)


def test_cli_reports_config_errors_with_exit_code_2(tmp_path, capsys):
    from evoaudit.cli import main

    path = tmp_path / "c.yaml"
    path.write_text("seed: -1\n")
    assert main(["validate-config", "--config", str(path)]) == 2
    assert "seed: -1 is less than the minimum of 0" in capsys.readouterr().err
