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
    match = r"evaluation\.shard: unknown key `shard`.*Allowed keys under evaluation: .*shards"
    with pytest.raises(ConfigError, match=match):
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


# --- input limits -----------------------------------------------------------------------------------------


def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join([*lines, f"lineages: *a{levels}"]) + "\n"


def test_a_billion_laughs_file_is_refused_while_it_is_parsed(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(_laughs(9))
    with pytest.raises(ConfigError, match=r"laughs.yaml: more than 16 YAML aliases.*at most 16 alias uses"):
        config_mod.load(path)


def test_a_few_yaml_anchors_still_load(tmp_path):
    path = tmp_path / "anchors.yaml"
    path.write_text("lineages: &ls [A, B]\ntransfer: {lineages: *ls}\n")
    assert config_mod.load(path).transfer.lineages == ("A", "B")


def test_aliases_expanding_past_the_node_budget_are_refused_in_a_mapping_too():
    # What Snakemake hands over after its own parse: one list shared eleven levels deep.
    node: list = ["lol"] * 4
    for _ in range(11):
        node = [node] * 4
    with pytest.raises(ConfigError, match=r"more than 100000 values \(YAML aliases expanded\)"):
        config_mod.from_dict({"lineages": node})


def test_a_config_file_over_one_mebibyte_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("lineages: [" + ", ".join(f"L{i}" for i in range(200_000)) + "]\n")
    with pytest.raises(
        ConfigError, match=r"big.yaml: \d+ bytes; a configuration file may have at most 1048576"
    ):
        config_mod.load(path)


def test_a_long_list_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"transfer.goals: a list of 20000 items; at most 10000"):
        config_mod.from_dict({"transfer": {"goals": ["injection_task_0"] * 20_000}})
    with pytest.raises(ConfigError, match=r"lineages: .* is too long; required: maxItems 256"):
        config_mod.from_dict({"lineages": [f"L{i}" for i in range(257)]})


def test_invalid_utf8_is_refused_naming_the_file_and_offset(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"seed: 1\nlineages: [L\xff1]\n")
    with pytest.raises(ConfigError, match=r"latin1.yaml: not UTF-8 text \(invalid byte 0xff at offset 20\)"):
        config_mod.load(path)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"executor": {"backend": "openai", "base_url": "gopher://127.0.0.1:70/"}}, "executor.base_url"),
        ({"optimizer": {"base_url": "file:///etc/passwd"}}, "optimizer.base_url"),
        ({"transfer": {"executor": {"base_url": "http:///v1"}}}, "transfer.executor.base_url"),
        ({"suite": {"apex": {"attacker": {"base_url": "ftp://h/v1"}}}}, "suite.apex.attacker.base_url"),
        (
            {"apex": {"models": [{"id": "m", "executor": {"backend": "openai", "base_url": "gopher://h"}}]}},
            "apex.models.0.executor.base_url",
        ),
        (
            {"methods_params": {"reasoningbank": {"embedder": {"base_url": "unix:/run/s.sock"}}}},
            "methods_params.reasoningbank.embedder.base_url",
        ),
    ],
)
def test_a_base_url_that_is_not_http_is_refused_naming_the_field(raw, field):
    with pytest.raises(ConfigError, match=rf"{field}: .* is not an http:// or https:// URL with a host"):
        config_mod.from_dict(raw)


def test_a_refused_base_url_does_not_echo_its_credentials():
    with pytest.raises(ConfigError) as err:
        config_mod.from_dict({"executor": {"base_url": "gopher://user:s3cret@h/"}})
    assert "s3cret" not in str(err.value) and "REDACTED@h/" in str(err.value)


def test_the_shipped_config_and_every_example_load():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "config"
    paths = [root / "config.yaml", *sorted((root / "examples").glob("*.yaml"))]
    assert len(paths) > 1
    for path in paths:
        config_mod.load(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: " + "[" * 20000 + "]" * 20000 + "\n", "nested more than 32 levels deep"),
        ("seed: 1\nseed: 2\n", "the key 'seed' is written twice in one mapping (line 2)"),
        ("seed: " + "1" * 5000 + "\n", "cannot be read: Exceeds the limit"),
        ("a: 2026-99-99\n", "cannot be read: month must be in 1..12"),
    ],
)
def test_a_yaml_document_its_parser_cannot_hold_is_a_config_error_naming_the_file(tmp_path, text, expected):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="odd.yaml: ") as info:
        config_mod.load(path)
    assert expected in str(info.value)


def test_cli_paths_default_to_the_configurations_results_dir(tmp_path):
    from evoaudit.cli import build_parser, fill_results_dir

    cfgfile = tmp_path / "c.yaml"
    cfgfile.write_text("results_dir: results-cues-off\n")
    args = build_parser().parse_args(["unseal", "--config", str(cfgfile)])
    fill_results_dir(args)
    assert args.results == "results-cues-off" and args.manifest == "results-cues-off/freeze/manifest.json"
    args = build_parser().parse_args(["retry-infra", "--config", str(cfgfile)])
    fill_results_dir(args)
    assert args.paths == ["results-cues-off/evaluate"]
    args = build_parser().parse_args(["unseal", "--config", str(cfgfile), "--results", "elsewhere"])
    fill_results_dir(args)
    assert args.manifest == "elsewhere/freeze/manifest.json"


def test_an_apex_model_may_not_take_the_summary_rows_name():
    from evoaudit import config as config_mod

    models = [{"id": "average", "executor": {"backend": "sim"}}]
    with pytest.raises(config_mod.ConfigError, match="id 'average' names the tables' summary rows"):
        config_mod.from_dict({"apex": {"models": models}})


def test_an_apex_models_sim_override_out_of_range_is_refused_naming_the_field():
    raw = {"apex": {"models": [{"id": "m1", "sim": {"inspection": {"py": 1.5}}}]}}
    with pytest.raises(ConfigError) as exc:
        config_mod.validate(raw, "cfg.yaml")
    assert "cfg.yaml: apex.models[0] (m1).sim.inspection.py: Input should be less than or equal to 1" in str(
        exc.value
    )
    assert "give a value that sim.apex.inspection.py admits" in str(exc.value)
    ok = {"apex": {"models": [{"id": "m1", "sim": {"inspection": {"py": 0.2}, "competence": 0.5}}]}}
    assert config_mod.validate(ok)["apex"]["models"][0]["sim"]["competence"] == 0.5
