"""environment.yml (conda users) and pyproject.toml (pip users) declare the same dependencies."""

from __future__ import annotations

import re
import tomllib

import yaml

from conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _spec(requirement: str) -> str:
    return requirement.replace(" ", "").lower()


def test_environment_yml_and_pyproject_agree():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pip = [r for r in pip_section if not r.startswith("-e")]
    assert sorted(map(_spec, conda_pip)) == sorted(map(_spec, declared))


def test_agentdojo_is_pinned_to_the_tested_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if _name(d) == "agentdojo"]
    assert pins == ["agentdojo==0.1.35"]
