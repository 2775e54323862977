"""The pre-flight of what a configuration needs from the machine: it names every unmet need and one install
line, and asks nothing of a machine that runs only the Banking suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.suite import machine
from evoaudit.suite.apex.runtime import isolation


def _path_without(tmp_path: Path, *hidden: str) -> str:
    """A PATH holding every program of the current PATH except ``hidden``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = bindir / name
            if name not in hidden and not target.exists():
                target.symlink_to(Path(d) / name)
    return str(bindir)


@pytest.fixture
def bare_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _path_without(tmp_path, "bwrap", "gcc"))
    isolation.probe.cache_clear()
    yield
    isolation.probe.cache_clear()


def _cfg(tmp_path: Path, **apex: object):
    return config_mod.from_dict(
        {"apex": {"enabled": True}, "suite": {"apex": {"out": str(tmp_path / "apex"), **apex}}}
    )


def test_a_machine_without_bubblewrap_and_gcc_is_refused_with_one_install_line(tmp_path, bare_machine):
    with pytest.raises(machine.MachineRequirementError) as info:
        machine.check(_cfg(tmp_path))
    text = str(info.value)
    assert "(2 unmet)" in text and "suite.apex.sandbox: unshare" in text and "gcc" in text
    assert text.splitlines()[-1].endswith("apt-get install -y bubblewrap gcc")


def test_built_worlds_and_attack_set_need_no_gcc_and_a_named_weak_sandbox_needs_no_bubblewrap(
    tmp_path, bare_machine
):
    if not isolation.sandbox_works("unshare"):
        pytest.skip(f"unshare does not start here: {isolation.probe('unshare')[1]}")
    cfg = _cfg(tmp_path, sandbox="unshare")
    (tmp_path / "apex").mkdir()
    (tmp_path / "apex" / "attacks.json").write_text("{}")
    assert [m.package for m in machine.missing(cfg)] == ["gcc"]  # the worlds' ELF helpers are still to build
    (tmp_path / "apex" / "apex_spec.json").write_text("{}")
    assert machine.missing(cfg) == []


def test_the_banking_suite_alone_needs_nothing_from_the_machine(tmp_path, bare_machine):
    assert machine.missing(config_mod.from_dict({"apex": {"enabled": False}})) == []
