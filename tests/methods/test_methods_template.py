"""``evoaudit new-method NAME`` writes a template package that is a working method as it is: registered by
its entry point, accepted by the config with its placebo, evolving a one-file artifact that deploys and
gets a placebo of its shape."""

from __future__ import annotations

import asyncio
import random
import sys
import tomllib
from importlib.metadata import EntryPoint
from types import SimpleNamespace

import pytest

from evoaudit import cli, method_plugins
from evoaudit import config as config_mod
from evoaudit.methods.conditions import condition
from evoaudit.methods.protocol import EvolveInputs
from evoaudit.methods.registry import get_method
from evoaudit.methods.template import write_template


@pytest.fixture
def template(tmp_path, monkeypatch):
    assert cli.main(["new-method", "my-memory", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "evoaudit-my-memory"
    declared = tomllib.loads((root / "pyproject.toml").read_text())
    value = declared["project"]["entry-points"][method_plugins.GROUP]["my-memory"]
    monkeypatch.syspath_prepend(str(root))
    real = method_plugins._registered()
    ep = EntryPoint("my-memory", value, method_plugins.GROUP)
    monkeypatch.setattr(method_plugins, "_registered", lambda: {**real, "my-memory": ep})
    method_plugins.load.cache_clear()
    yield root
    method_plugins.load.cache_clear()
    sys.modules.pop("evoaudit_my_memory", None)


def test_the_template_is_a_method_the_config_and_the_conditions_accept(template):
    cfg = config_mod.from_dict(
        {"methods": ["static", "my-memory"], "conditions": ["static", "my-memory", "placebo-my-memory"]}
    )
    assert cfg.methods == ("static", "my-memory")
    assert condition("placebo-my-memory").method == "placebo-my-memory"
    assert method_plugins.load("my-memory").learns


def test_the_templates_artifact_deploys_and_gets_a_placebo_of_its_shape(template, tmp_path):
    method = get_method("my-memory")
    cfg = config_mod.from_dict({"methods": ["static", "my-memory"], "conditions": ["static", "my-memory"]})
    # The template reads only the calls of each labelled trajectory.
    attempt = SimpleNamespace(calls=[SimpleNamespace(function="get_balance")])
    labelled = [(attempt, i % 2 == 0) for i in range(4)]
    inputs = EvolveInputs(config_mod.method_settings(cfg), "L1", labelled, "checker", [], None)
    state, diagnostics = asyncio.run(method.evolve(inputs))
    assert diagnostics == {"notes": 2} and list(state) == ["my-memory.md"]
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "my-memory.md").write_text(state["my-memory.md"])
    [(heading, body)] = method.deploy(artifact, "literal").sections(None)
    assert heading == "My memory notes" and body == state["my-memory.md"]
    placebo = method.placebo(artifact, random.Random(0))
    fake = placebo.state["my-memory.md"]
    assert fake != body and len(fake.splitlines()) == len(body.splitlines())
    assert all(line.startswith("- ") for line in fake.splitlines())
    assert 0.8 <= placebo.placebo_chars / placebo.real_chars <= 1.25


def test_new_method_refuses_an_installed_name_or_a_placebo_name(tmp_path):
    with pytest.raises(ValueError, match="already installed"):
        write_template("awm", tmp_path)
    with pytest.raises(ValueError, match="not\nstarting with 'placebo-'|starting with 'placebo-'"):
        write_template("placebo-x", tmp_path)
    assert cli.main(["new-method", "Bad Name", "--dir", str(tmp_path)]) == 2


def test_a_plugin_reading_the_removed_inputs_cfg_is_told_what_replaced_it():
    cfg = config_mod.from_dict({})
    inputs = EvolveInputs(config_mod.method_settings(cfg), "L1", [], "checker", [], None)
    with pytest.raises(AttributeError, match=r"EvolveInputs\.settings .*docs/methods\.md"):
        inputs.cfg  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        inputs.nothing  # noqa: B018
