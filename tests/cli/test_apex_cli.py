"""`evoaudit apex build|serve` and the `suite.apex` configuration block."""

from __future__ import annotations

import json

import pytest

from evoaudit import config
from evoaudit.cli import main


def _cfg(tmp_path, extra: str = "") -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"suite:\n  apex:\n    scale: 0.05\n    out: {tmp_path / 'apex'}\n{extra}")
    return str(path)


def test_defaults_leave_banking_settings_alone_and_bad_values_name_the_field():
    cfg = config.from_dict({})
    assert cfg.suite.name == "banking" and cfg.suite.apex.transport == "direct"
    assert cfg.suite.apex.scale == 1.0 and not cfg.suite.apex.allow_unsandboxed
    with pytest.raises(config.ConfigError, match="suite.apex.transport"):
        config.from_dict({"suite": {"apex": {"transport": "grpc"}}})
    with pytest.raises(config.ConfigError, match="suite.apex.scale"):
        config.from_dict({"suite": {"apex": {"scale": 0}}})


def test_build_command_writes_world_task_and_manifest(tmp_path, capsys):
    assert main(["apex", "build", "--config", _cfg(tmp_path), "--task", "law_nda_terms"]) == 0
    out = tmp_path / "apex" / "v0"
    manifest = json.loads((out / "apex_manifest.json").read_text())
    assert [t["task_id"] for t in manifest["tasks"]] == ["law_nda_terms"]
    assert (out / "worlds" / "world_law_nda_terms_v0.zip").exists()
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["tasks"] == 1


def test_unknown_task_and_unbuilt_serve_fail_with_the_fix(tmp_path, capsys):
    assert main(["apex", "build", "--config", _cfg(tmp_path), "--task", "nope"]) == 1
    assert "unknown APEX task" in capsys.readouterr().err
    assert main(["apex", "serve", "law_nda_terms", "--config", _cfg(tmp_path)]) == 1
    assert "run `evoaudit apex build` first" in capsys.readouterr().err
