"""The call's control group as files: which interface is used where, and what is written there (a
directory standing in for the cgroup mount; the real kernel is exercised by test_apex_sandbox_hostile)."""

from __future__ import annotations

from evoaudit.suite.apex.runtime import callgroup
from evoaudit.suite.apex.runtime.callgroup import CallGroup


def _own(monkeypatch, path: str) -> None:
    monkeypatch.setattr(callgroup, "_own_path", lambda hierarchy: path)


def test_cgroup_v2_gets_memory_swap_and_pids_bounds_under_the_audits_own_group(tmp_path, monkeypatch):
    monkeypatch.setattr(callgroup, "CGROUP_ROOT", tmp_path)
    _own(monkeypatch, "/user.slice/audit")
    own = tmp_path / "user.slice" / "audit"
    own.mkdir(parents=True)
    (own / "cgroup.subtree_control").write_text("cpu memory pids\n")
    real_mkdir = callgroup.Path.mkdir

    def mkdir(self, *a, **k):  # the kernel makes a group's interface files; here the test does
        real_mkdir(self, *a, **k)
        (self / "memory.swap.max").write_text("max")

    monkeypatch.setattr(callgroup.Path, "mkdir", mkdir)
    group = CallGroup.create(1 << 30, 64)
    assert group is not None and len(group.dirs) == 1 and group.dirs[0].parent == own
    d = group.dirs[0]
    assert (d / "memory.max").read_text() == str(1 << 30)
    assert (d / "memory.swap.max").read_text() == "0" and (d / "pids.max").read_text() == "64"
    assert group.procs == [str(d / "cgroup.procs")]


def test_cgroup_v2_without_the_controllers_delegated_falls_back_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(callgroup, "CGROUP_ROOT", tmp_path)
    _own(monkeypatch, "/")
    (tmp_path / "cgroup.subtree_control").write_text("cpu\n")
    assert CallGroup.create(1 << 30, 64) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cgroup.subtree_control"]
