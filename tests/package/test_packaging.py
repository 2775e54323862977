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
    extras = project["optional-dependencies"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pip = {_spec(r) for r in pip_section if not r.startswith("-e")}
    # Everything needed to run and test, and cluster submission, is in the conda environment with the
    # same version bounds; the heavy third-party-server test extra is installed by its own script.
    required = {_spec(r) for r in [*project["dependencies"], *extras["test"], *extras["slurm"]]}
    declared = {_spec(r) for r in [*project["dependencies"], *(r for rs in extras.values() for r in rs)]}
    assert required <= conda_pip, f"missing from environment.yml: {sorted(required - conda_pip)}"
    assert conda_pip <= declared, f"not in pyproject.toml: {sorted(conda_pip - declared)}"


def test_agentdojo_is_pinned_to_the_tested_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if _name(d) == "agentdojo"]
    assert pins == ["agentdojo==0.1.35"]
