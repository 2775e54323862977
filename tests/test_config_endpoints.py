"""Endpoints named once: one `endpoints.default` block moves every role to a server, a role may name
another entry or override its keys, and a name is never a setting (hashes see only what is sent)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

from evoaudit import config as config_mod
from evoaudit.config import ConfigError
from evoaudit.models import preflight
from evoaudit.ops.plan import format_plan, make_plan

VLLM = {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen2.5-7B-Instruct"}
ROLES = {"executor", "optimizer", "transfer.executor", "apex.judge", "suite.apex.attacker"}


def test_one_default_endpoint_moves_every_role_to_it():
    cfg = config_mod.from_dict({"endpoints": {"default": VLLM}})
    roles = dict(cfg.endpoint_roles())
    apex_model = "apex.models.Qwen-Qwen2.5-7B-Instruct.executor"  # named after the model, without '/'
    assert set(roles) == ROLES | {apex_model}
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
    named = config_mod.from_dict({"endpoints": {"default": VLLM}, "apex": {"models": [{"id": "m"}]}})
    written = config_mod.from_dict(
        {
            "executor": VLLM,
            "optimizer": VLLM,
            "transfer": {"executor": VLLM},
            "suite": {"apex": {"attacker": VLLM}},
            "apex": {"judge": VLLM, "models": [{"id": "m", "executor": VLLM}]},
        }
    )
    assert named.sha256() == written.sha256()
    assert named.apex == written.apex and named.suite == written.suite
    # The full dump loads back to the same configuration.
    assert config_mod.from_dict(named.full_dump()) == named


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
