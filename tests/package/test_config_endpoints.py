"""Endpoints named once: one `endpoints.default` block moves every role to a server, a role may name
another entry or override its keys, and a name is never a setting (hashes see only what is sent)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

from evoaudit import config as config_mod
from evoaudit.config import ConfigError, config_sha256
from evoaudit.config import limits as config_limits
from evoaudit.models import preflight
from evoaudit.ops.plan import format_plan, make_plan

VLLM = {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen2.5-7B-Instruct"}
ROLES = {"executor", "optimizer", "transfer.executor", "apex.judge", "suite.apex.attacker"}


def test_one_default_endpoint_moves_every_role_to_it():
    second = VLLM | {"model": "small"}
    cfg = config_mod.from_dict(
        {"endpoints": {"default": VLLM, "second": second}, "transfer": {"executor": {"endpoint": "second"}}}
    )
    roles = dict(cfg.endpoint_roles())
    apex_model = "apex.models.Qwen-Qwen2.5-7B-Instruct.executor"  # named after the model, without '/'
    assert set(roles) == ROLES | {apex_model}
    assert roles.pop("transfer.executor").model == "small"
    for role, ep in roles.items():
        assert (ep.backend, ep.base_url, ep.model) == tuple(VLLM.values()), role
        assert cfg.endpoint_name(ep) == "default"
    # Sampling stays each role's own: the optimizer keeps its default temperature.
    assert roles["optimizer"].temperature == 1.0 and roles["executor"].temperature == 0.0


def test_a_roles_own_keys_win_and_its_wire_is_laid_over_the_named_one():
    cfg = config_mod.from_dict(
        {
            "endpoints": {"default": VLLM | {"timeout_s": 120, "wire": {"parse_text_tool_calls": True}}},
            "optimizer": {"timeout_s": 900, "wire": {"structured_output": "off"}},
            "transfer": {"enabled": False},
        }
    )
    assert cfg.optimizer.timeout_s == 900 and cfg.executor.timeout_s == 120
    assert cfg.optimizer.wire.parse_text_tool_calls and cfg.optimizer.wire.structured_output == "off"


def test_a_role_names_another_endpoint_and_roles_without_a_default_stay_on_the_simulator():
    second = VLLM | {"model": "small"}
    cfg = config_mod.from_dict(
        {"endpoints": {"second": second}, "transfer": {"executor": {"endpoint": "second"}}}
    )
    assert cfg.transfer.executor.model == "small" and cfg.endpoint_name(cfg.transfer.executor) == "second"
    assert cfg.executor.backend == "sim" and cfg.apex.judge.model == "evoaudit-sim-judge"


def test_an_unknown_endpoint_name_is_refused_with_the_nearest_name():
    with pytest.raises(ConfigError, match=r"apex\.judge\.endpoint: 'vlm' is not under 'endpoints'.*`vllm`"):
        config_mod.from_dict({"endpoints": {"vllm": VLLM}, "apex": {"judge": {"endpoint": "vlm"}}})


def test_a_named_endpoint_cannot_refer_to_another():
    with pytest.raises(ConfigError, match=r"endpoints\.a\.endpoint: a named endpoint cannot refer"):
        config_mod.from_dict({"endpoints": {"a": {"endpoint": "b"}, "b": VLLM}})


def test_a_name_is_not_a_setting_the_same_roles_written_out_hash_the_same():
    second = VLLM | {"model": "small", "extra_body": {}}
    named = config_mod.from_dict(
        {
            "endpoints": {
                "default": VLLM | {"extra_body": {"chat_template_kwargs": {"x": 1}}},
                "second": second,
            },
            "transfer": {"executor": {"endpoint": "second"}},
            "apex": {"models": [{"id": "m"}]},
        }
    )
    full = VLLM | {"extra_body": {"chat_template_kwargs": {"x": 1}}}
    written = config_mod.from_dict(
        {
            "executor": full,
            "optimizer": full,
            "transfer": {"executor": second},
            "suite": {"apex": {"attacker": full}},
            "apex": {"judge": full, "models": [{"id": "m", "executor": full}]},
        }
    )
    assert config_sha256(named) == config_sha256(written)
    assert named.apex == written.apex and named.suite == written.suite
    # The full dump (results/config/config.json, a bundle's config) loads back to the same settings: the
    # roles are written out in full, so no entry is laid under them a second time.
    again = config_mod.from_dict(named.full_dump())
    assert again.full_dump() == named.full_dump() and config_sha256(again) == config_sha256(named)
    assert again.transfer.executor.extra_body == {}


def test_every_apex_model_executor_is_preflighted_as_a_tool_caller(monkeypatch):
    cfg = config_mod.from_dict({"apex": {"models": [{"id": "m", "executor": VLLM}]}})
    (target,) = preflight.targets(cfg)
    assert target.role == "apex.models.m.executor" and target.calls_tools and target.renders


def test_plan_shows_each_roles_endpoint_and_says_which_are_the_simulator():
    cfg = config_mod.from_dict({"endpoints": {"second": VLLM}, "optimizer": {"endpoint": "second"}})
    text = format_plan(make_plan(cfg, "no-results-here"))
    lines = text.splitlines()
    shown = "endpoints.second: Qwen/Qwen2.5-7B-Instruct at http://127.0.0.1:8000/v1"
    assert any(line.split()[0] == "optimizer" and shown in line for line in lines)
    assert any(line.split()[0] == "executor" and "simulator evoaudit-sim" in line for line in lines)
    assert "cost nothing" in text


@pytest.mark.parametrize("example", ["vllm", "openai-hosted"])
def test_the_hosted_and_vllm_examples_put_every_role_on_their_named_endpoint(example, monkeypatch):
    path = REPO / "config" / "examples" / f"{example}.yaml"
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    cfg = config_mod.load(path)
    roles = dict(cfg.endpoint_roles())
    assert {"executor", "optimizer", "apex.judge", "suite.apex.attacker"} <= set(roles)
    assert any(r.startswith("apex.models.") for r in roles)
    assert all(ep.backend == "openai" and cfg.endpoint_name(ep) for ep in roles.values()), roles
    for command in (["validate-config"], ["plan"]):
        run = subprocess.run(
            [sys.executable, "-m", "evoaudit.cli", *command, "--config", str(path)],
            capture_output=True, text=True, cwd=REPO, env={**os.environ, "OPENAI_API_KEY": "x"},
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
    assert (
        "simulator" not in run.stdout.split("\n\n", 1)[0]
    )  # the plan's role table: no role on the simulator


def test_a_yaml_alias_shared_by_two_roles_gives_each_its_own_defaults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "executor: &ep {backend: openai, base_url: 'http://127.0.0.1:8000/v1', model: m}\noptimizer: *ep\n"
    )
    cfg = config_mod.load(path)
    assert (cfg.executor.temperature, cfg.optimizer.temperature) == (0.0, 1.0)


def test_the_transfer_check_on_the_executors_own_model_is_refused_with_the_fix():
    with pytest.raises(
        ConfigError, match=r"transfer\.executor: .*own endpoint and model.*transfer\.enabled: false"
    ):
        config_mod.from_dict({"endpoints": {"default": VLLM}})
    assert config_mod.from_dict({"endpoints": {"default": VLLM}, "transfer": {"enabled": False}})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (  # one line, at the entry: not one per role it would have been copied into
            {"endpoints": {"default": VLLM | {"max_token": 5}}},
            r"^config: invalid configuration\n  - endpoints\.default\.max_token: unknown key[^\n]*$",
        ),
        ({"endpoints": {"default": "openai"}}, r"endpoints\.default: 'openai' is not of type 'object'"),
        ({"endpoints": {1: VLLM}}, r"endpoints: the name 1 must be a string"),
        ({"executor": {"endpoint": ["a"]}}, r"executor\.endpoint: \['a'\] must be the name"),
        (
            {"endpoints": {"default": {"backend": "openai", "model": "m"}}},
            r"endpoints\.default\.base_url: required",
        ),
    ],
)
def test_a_bad_named_endpoint_is_reported_once_where_it_was_written(raw, expected):
    with pytest.raises(ConfigError, match=expected):
        config_mod.from_dict(raw)


def test_copies_into_every_role_count_against_the_size_limit(monkeypatch):
    monkeypatch.setattr(config_limits, "MAX_NODES", 2_000)
    models = [{"id": f"m{i}"} for i in range(50)]
    big = VLLM | {"extra_body": {"x": list(range(100))}}
    with pytest.raises(ConfigError, match="more than 2000 values"):
        config_mod.from_dict(
            {"endpoints": {"default": big}, "transfer": {"enabled": False}, "apex": {"models": models}}
        )


def test_an_apex_model_id_from_a_model_name_starts_with_a_letter_or_digit():
    cfg = config_mod.from_dict(
        {"endpoints": {"default": VLLM | {"model": "_local/model"}}, "transfer": {"enabled": False}}
    )
    assert [m.id for m in cfg.apex.models] == ["local-model"]


@pytest.mark.parametrize("example", ["vllm", "openai-hosted", "local-qwen"])
def test_an_example_merged_over_the_shipped_config_as_snakemake_does_keeps_every_role_on_it(example):
    # `snakemake --configfile EXAMPLE` lays the example over config/config.yaml with Snakemake's own merge:
    # a role's backend or model written in the shipped file would win over endpoints.default.
    import yaml
    from snakemake.utils import update_config

    merged = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(merged, yaml.safe_load((REPO / "config" / "examples" / f"{example}.yaml").read_text()))
    cfg = config_mod.from_dict(merged)
    roles = dict(cfg.endpoint_roles())
    assert {"executor", "optimizer", "apex.judge", "suite.apex.attacker"} <= set(roles)
    assert all(ep.backend == "openai" for ep in roles.values()), {r: ep.backend for r, ep in roles.items()}


def test_plan_shows_no_credential_of_a_base_url():
    url = "http://user:pw@127.0.0.1:8000/v1?key=0123456789abcdef&sig=s3cr3t"
    cfg = config_mod.from_dict(
        {"endpoints": {"default": VLLM | {"base_url": url}}, "transfer": {"enabled": False}}
    )
    text = format_plan(make_plan(cfg, "no-results-here"))
    assert "http://127.0.0.1:8000/v1" in text
    assert not any(secret in text for secret in ("pw", "user", "0123456789abcdef", "s3cr3t"))


def test_no_cache_turns_the_cache_off_for_every_role_that_calls_a_model():
    cfg = config_mod.from_dict({"endpoints": {"default": VLLM}, "transfer": {"enabled": False}})
    assert all(ep.cache for _, ep in cfg.endpoint_roles())
    off = config_mod.without_cache(cfg)
    assert not any(ep.cache for _, ep in off.endpoint_roles()) and not off.transfer.executor.cache
