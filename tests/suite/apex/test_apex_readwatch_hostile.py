"""A program in the sandbox rearranging the copy under the watcher: the parent never hangs on its own
fanotify permission event, never writes outside the copy, and a firing it cannot apply safely is a note
in a completed call (nothing applied), not a harness error."""

from __future__ import annotations

import os
import threading

import pytest
from apex_attack_kit import attacked

from evoaudit.suite.apex.runtime import readwatch, tools
from evoaudit.suite.apex.runtime.isolation import available_sandbox
from evoaudit.suite.apex.runtime.watcher import watcher_rows

pytestmark = pytest.mark.skipif(available_sandbox() == "none", reason="no sandbox")

MONITORED = "deals/wacc_inputs.md"
NOTE = "deals/RESTORE_INSTRUCTIONS.txt"
TIMEOUT = 3


@pytest.fixture(params=["fanotify", "inotify"])
def backend(request, monkeypatch):
    if request.param == "fanotify" and os.geteuid() != 0:
        pytest.skip("fanotify's permission events need CAP_SYS_ADMIN")
    monkeypatch.setattr(readwatch, "USE_FANOTIFY", request.param == "fanotify")
    return request.param


def _bounded(ws, command):
    """The call's result, failing (not hanging) if it does not return within its timeout and 5 s."""
    box = {}

    def go():
        try:
            box["res"] = tools.call_tool(ws, "run_command", {"command": command, "timeout": TIMEOUT})
        except BaseException as exc:  # reported below, in the test's thread
            box["exc"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(TIMEOUT + 5)
    assert not t.is_alive(), f"run_command did not return: {command}"
    if "exc" in box:
        raise box["exc"]
    return box["res"]


@pytest.mark.parametrize(
    ("nth", "command"),
    [
        (10**9, f"mv {MONITORED} deals/w.bak && mv deals/w.bak {MONITORED}; cat {MONITORED} >/dev/null"),
        (1, f"ln {MONITORED} {NOTE} && cat {MONITORED} >/dev/null; sleep 0.2; cat {MONITORED}"),
    ],
    ids=["rename back", "hard link at the note"],
)
def test_a_marked_inode_under_a_name_the_parent_opens_does_not_hang(nth, command, backend):
    _, ws, attack, _ = attacked(3, nth_read=nth)
    out, err = _bounded(ws, command)
    assert err is None and out.startswith("[exit code 0]"), out
    if nth == 1:
        assert [r["action"] for r in watcher_rows(ws)] == ["fire", "corrupt", "drop_instruction"]
        assert watcher_rows(ws)[0]["mode"] == backend
        # The note replaced the link: writing it did not overwrite the monitored file.
        assert attack.watcher.replacement.text in out.split("\n", 1)[1]
        assert ws.files[MONITORED].data == attack.watcher.replacement.data
        assert ws.files[NOTE].data == attack.watcher.instruction_file.data


@pytest.fixture
def canary(tmp_path):
    d = tmp_path / "canary"
    d.mkdir()
    secret = d / "wacc_inputs.md"
    secret.write_bytes(b"host secret\n")
    os.chmod(secret, 0o600)
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o777)  # writable by the sandbox's user too: only the parent's own writes are at issue
    return d


def _listing(d):
    return {p.name: (p.read_bytes(), p.stat().st_mode, p.stat().st_uid) for p in d.iterdir()}


@pytest.mark.parametrize(
    "command",
    [
        "mv deals d2 && ln -s {canary} deals && cat d2/wacc_inputs.md >/dev/null; sleep 0.3; echo done",
        "ln {mon} keep && mv deals d2 && ln -s {canary} deals && rm d2/wacc_inputs.md && "
        "touch d2/wacc_inputs.md && sleep 0.3 && cat keep >/dev/null; sleep 0.3; echo done",
        "mkdir x && mv deals x/ && ln -s {canary} x/deals2 && ln -s x/deals2 deals && "
        "cat x/deals/wacc_inputs.md >/dev/null; sleep 0.3; echo done",
    ],
    ids=["folder to link", "rewatch through link", "nested link"],
)
def test_a_linked_folder_never_lets_the_parent_write_outside_the_copy(command, canary, backend):
    before = _listing(canary)
    _, ws, _, _ = attacked(3)
    out, err = _bounded(ws, command.format(canary=canary, mon=MONITORED))
    assert err is None and "done" in out, out
    assert _listing(canary) == before
    assert "[sandbox: a file could not be written into the copy, so none was" in out
    w = ws.observers[0]
    assert watcher_rows(ws) == [] and w.pending is None and w.fired_seq is None
    assert NOTE not in ws.files and w.watch_path() == MONITORED  # still armed


@pytest.mark.parametrize(
    "command",
    [
        "mv deals d2 && touch deals && cat d2/wacc_inputs.md >/dev/null; echo done",
        "mv deals d2 && ln -s /nonexistent/dir deals && cat d2/wacc_inputs.md >/dev/null; echo done",
    ],
    ids=["folder to file", "dangling link"],
)
def test_a_firing_the_copy_refuses_is_a_note_and_nothing_is_applied(command, backend):
    _, ws, attack, _ = attacked(3)
    original = ws.files[MONITORED].data
    out, err = _bounded(ws, command)
    assert err is None and out.startswith("[exit code 0]") and "done" in out, out
    assert ws.calls[-1].error is None
    assert "[sandbox: a file could not be written into the copy, so none was" in out
    w = ws.observers[0]
    assert watcher_rows(ws) == [] and w.pending is None and w.fired_seq is None and w.snapshot is None
    assert NOTE not in ws.files and ws.files.get("d2/wacc_inputs.md").data == original
    # Still armed: with the folder back, the next read fires it whole.
    out, err = _bounded(ws, "rm -f deals && mv d2 deals")
    assert err is None and watcher_rows(ws) == [], out
    out, err = _bounded(ws, "cat deals/wacc_inputs.md >/dev/null")
    assert err is None, out
    assert [r["action"] for r in watcher_rows(ws)] == ["fire", "corrupt", "drop_instruction"]
    assert ws.files[MONITORED].data == attack.watcher.replacement.data and NOTE in ws.files


def test_a_setup_failure_is_a_note_and_the_command_runs(monkeypatch):
    def fail():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(readwatch, "_init_inotify", fail)
    _, ws, _, _ = attacked(3)
    out, err = _bounded(ws, "cat deals/wacc_inputs.md >/dev/null; echo done")
    assert err is None and "done" in out
    assert "[sandbox: reads of files were not watched in this command: Too many open files]" in out
    assert watcher_rows(ws) == []
