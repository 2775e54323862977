"""A run owns its results directory: results_dir lies inside the checkout, the working directory or a
configured results_roots entry, never in a system directory; and a second configuration cannot take a
directory another one owns (evoaudit.ops.ownership)."""

from __future__ import annotations

import os

import pytest

from evoaudit import config as config_mod
from evoaudit.config import config_sha256
from evoaudit.ops import ownership
from evoaudit.ops.ownership import OWNER_FILE, ResultsDirError
from evoaudit.records import ResultsOwner

SOURCE = "config (test)"


def _cfg(**raw) -> config_mod.Config:
    return config_mod.from_dict(raw)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize("where", ["/", "/etc", "/proc/self", "/usr/local/results", "/sys/x", "/dev/shm/r"])
def test_a_system_directory_is_refused_whatever_results_roots_say(checkout, where):
    with pytest.raises(ResultsDirError, match=r"results_dir: .*(root directory|system directory)"):
        ownership.check_location(_cfg(results_dir=where, results_roots=["/"]), checkout, SOURCE)
    with pytest.raises(ResultsDirError, match=r"results_roots: '/' .* a system directory"):
        ownership.check_location(_cfg(results_roots=["/"]), checkout, SOURCE)


def test_a_link_into_a_system_directory_is_refused(checkout):
    (checkout / "results").symlink_to("/etc")
    with pytest.raises(ResultsDirError, match="resolves to /etc"):
        ownership.check_location(_cfg(), checkout, SOURCE)


def test_inside_the_checkout_passes_and_outside_needs_results_roots(checkout, tmp_path):
    assert ownership.check_location(_cfg(results_dir="results-x"), checkout, SOURCE) == checkout / "results-x"
    outside = tmp_path / "scratch" / "run1"
    with pytest.raises(ResultsDirError, match="outside the checkout.*results_roots"):
        ownership.check_location(_cfg(results_dir=str(outside)), checkout, SOURCE)
    cfg = _cfg(results_dir=str(outside), results_roots=[str(tmp_path / "scratch")])
    assert ownership.check_location(cfg, checkout, SOURCE) == outside
    with pytest.raises(ResultsDirError, match="must be an absolute path"):
        ownership.check_location(_cfg(results_roots=["scratch"]), checkout, SOURCE)


def test_results_roots_stay_out_of_the_configuration_hash():
    assert config_sha256(_cfg(results_roots=["/scratch"])) == config_sha256(_cfg())


def test_a_second_configuration_cannot_take_a_directory_another_owns(checkout):
    first, second = checkout / "config" / "a.yaml", checkout / "config" / "b.yaml"
    first.parent.mkdir()
    first.write_text("seed: 1\n")
    second.write_text("seed: 2\n")
    marker = ownership.claim(_cfg(seed=1), [first], SOURCE)
    assert marker.resolve() == checkout / "results" / OWNER_FILE
    owner = ResultsOwner.read(marker)
    assert owner.config_sha256 == config_sha256(_cfg(seed=1)) and owner.config_files == [str(first)]
    with pytest.raises(ResultsDirError) as err:
        ownership.check_owner(_cfg(seed=2), [first.parent / "b.yaml"], SOURCE)
    text = str(err.value)
    assert "belongs to another configuration" in text and str(first) in text and str(second) in text
    assert "results_dir of its own" in text and f"delete {os.path.join('results', OWNER_FILE)}" in text
    with pytest.raises(ResultsDirError):
        ownership.claim(_cfg(seed=2), [second], SOURCE)
    assert ResultsOwner.read(marker) == owner  # refused without a write


def test_the_same_configuration_edited_or_copied_keeps_the_directory(checkout):
    first = checkout / "a.yaml"
    first.write_text("seed: 1\n")
    marker = ownership.claim(_cfg(seed=1), [first], SOURCE)
    since = ResultsOwner.read(marker).since
    # Its file edited (or a --config override): the same files, a new hash; the marker follows.
    ownership.claim(_cfg(seed=3), [first], SOURCE)
    assert ResultsOwner.read(marker).config_sha256 == config_sha256(_cfg(seed=3))
    assert ResultsOwner.read(marker).since == since
    # The same settings read from another file are the same configuration.
    assert ownership.check_owner(_cfg(seed=3), [checkout / "copy.yaml"], SOURCE) is not None
    # A directory no run has claimed belongs to nobody yet.
    assert ownership.check_owner(_cfg(results_dir="fresh"), [first], SOURCE) is None
