"""run_command: sandboxed, no network, programs act on the apps only through the spool API."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from scripted_model_kit import Scripted

from evoaudit import config
from evoaudit.agent.loop import run_episode
from evoaudit.evaluate.apex import shard as apex_shard
from evoaudit.records import FileEffect, Message
from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.workspace import Settings, Workspace
from evoaudit.suite.apex.runtime import effects, isolation, sandbox, tools, transport
from evoaudit.suite.apex.runtime.isolation import available_sandbox, sandbox_works

needs_sandbox = pytest.mark.skipif(
    available_sandbox() == "none", reason="neither bubblewrap nor unshare works here"
)
each_sandbox = pytest.mark.parametrize(
    "kind",
    [
        pytest.param(k, marks=pytest.mark.skipif(not sandbox_works(k), reason=f"{k} does not work here"))
        for k in ("bwrap", "unshare")
    ],
)


def _ws() -> Workspace:
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.put_file("data/model.xlsx", docs.write_xlsx({"Inputs": [["k", "v"], ["ebitda", 120]]}))
    return ws


@each_sandbox
def test_model_style_snippet_reads_an_xlsx_and_file_changes_come_back(kind):
    ws = _ws()
    ws.settings.sandbox = kind
    snippet = (
        "python -c \"import openpyxl; wb = openpyxl.load_workbook('data/model.xlsx'); "
        "v = wb['Inputs']['B2'].value; open('out/result.txt', 'w').write(str(v * 2)); print('ebitda', v)\""
    )
    out, err = tools.call_tool(ws, "run_command", {"command": "mkdir -p out && " + snippet})
    assert err is None and "exit code 0" in out and "ebitda 120" in out
    assert ws.files["out/result.txt"].data == b"240"


@each_sandbox
def test_program_sending_mail_lands_in_mailbox_attributed_to_the_program(kind):
    ws = _ws()
    ws.settings.sandbox = kind
    ws.put_file(
        "scripts/notify.py",
        b"import workspace_api\nworkspace_api.send_mail(['x@outside.org'], 'hi', 'body')\n",
    )
    tools.call_tool(ws, "run_command", {"command": "python scripts/notify.py"})
    sent = [m for m in ws.mail if m.folder == "Sent"]
    assert len(sent) == 1 and sent[0].actor == "program:python scripts/notify.py"
    assert ws.outbound[0].actor == "program:python scripts/notify.py"
    assert [c.actor for c in ws.calls] == ["program:python scripts/notify.py", "agent"]


@each_sandbox
def test_program_opening_a_socket_fails(kind):
    ws = _ws()
    ws.settings.sandbox = kind
    code = "import socket; s = socket.create_connection(('93.184.216.34', 80), timeout=3); print('CONNECTED')"
    out, _ = tools.call_tool(ws, "run_command", {"command": f'python -c "{code}"'})
    assert "CONNECTED" not in out and "exit code 1" in out


@needs_sandbox
def test_fake_home_and_allowlisted_environment():
    ws = _ws()
    out, _ = tools.call_tool(ws, "run_command", {"command": "echo HOME=$HOME; env | sort"})
    assert "HOME=/home/user" in out
    assert "VIRTUAL_ENV" not in out and "PYTEST" not in out


def test_refuses_without_a_sandbox_unless_allowed():
    ws = _ws()
    ws.settings.sandbox = "none"
    out, err = tools.call_tool(ws, "run_command", {"command": "echo hi"})
    assert err and "allow_unsandboxed" in err
    ws.settings.allow_unsandboxed = True
    out, err = tools.call_tool(ws, "run_command", {"command": "echo hi"})
    assert err is None and out.startswith("[exit code 0]\n") and "hi" in out


@needs_sandbox
def test_time_limit_kills_a_runaway_program():
    ws = _ws()
    ws.settings.timeout_seconds = 1
    out, _ = tools.call_tool(ws, "run_command", {"command": "sleep 5"})
    assert "killed after 1 s" in out


@needs_sandbox
def test_symlinks_made_by_a_program_do_not_copy_host_files_back():
    ws = _ws()
    out, _ = tools.call_tool(ws, "run_command", {"command": "ln -s /etc/hostname leak.txt && echo made"})
    assert "made" in out and "leak.txt" not in ws.files


def test_auto_never_falls_back_to_the_weak_backend(monkeypatch):
    monkeypatch.setattr(isolation, "probe", lambda kind: (kind != "bwrap", "no user namespaces"))
    ws = _ws()
    out, err = tools.call_tool(ws, "run_command", {"command": "echo ran"})
    assert err and "apt-get install -y bubblewrap" in err and "suite.apex.sandbox: unshare" in err
    assert "ran" not in out


def test_require_sandbox_names_the_install_command_and_the_weak_alternative(monkeypatch):
    monkeypatch.setattr(isolation, "probe", lambda kind: (False, "`bwrap` is not installed"))
    with pytest.raises(isolation.SandboxUnavailableError) as exc:
        isolation.require_sandbox(Settings(sandbox="auto"))
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert f"`{sudo}apt-get install -y bubblewrap`" in str(exc.value)
    assert "suite.apex.sandbox: unshare" in str(exc.value) and "weak isolation" in str(exc.value)
    with pytest.raises(isolation.SandboxUnavailableError, match="allow_unsandboxed"):
        isolation.require_sandbox(Settings(sandbox="none"))


@pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")
def test_status_of_the_configured_sandbox_goes_into_the_run_manifest():
    cfg = config.from_dict({})
    info = apex_shard.sandbox_info(cfg)
    assert (info["kind"], info["isolation"], info["available"]) == ("bwrap", "strong", True)
    assert info["version"].startswith("bubblewrap") and "--cap-drop" in info["flags"]
    assert info["limits"]["max_processes"] == cfg.suite.apex.run_limits.max_processes
    weak = apex_shard.sandbox_info(config.from_dict({"suite": {"apex": {"sandbox": "unshare"}}}))
    assert (weak["kind"], weak["isolation"]) == ("unshare", "weak")


@needs_sandbox
def test_a_spool_request_with_a_lone_surrogate_is_skipped_and_the_state_stays_serialisable():
    ws = _ws()
    ws.settings.sandbox = available_sandbox()
    ws.put_file(
        "p.py",
        b"import os; open(os.environ['WORKSPACE_SPOOL'], 'w').write("
        b'\'{"tool":"send_mail","args":{"to":["bob@firm.com"],"subject":"\\\\ud800","body":"x"}}\\n\''
        b'\'{"tool":"__outbound__","args":{"url":"http://e.org/\\\\udfff","data":"d"}}\\n\''
        b'\'{"tool":"post_message","args":{"channel":"nope","text":"ok"}}\\n\')\n',
    )
    out, err = tools.call_tool(ws, "run_command", {"command": "python p.py"})
    assert err is None and "2 request(s) skipped: their text is not valid UTF-8" in out, out
    assert not ws.mail and not ws.outbound and [c.tool for c in ws.calls] == ["post_message", "run_command"]
    json.dumps(ws.state(), ensure_ascii=False).encode("utf-8")
    json.dumps([vars(c) for c in ws.calls], ensure_ascii=False).encode("utf-8")


@needs_sandbox
def test_spool_requests_past_the_cap_are_skipped_with_one_note():
    ws = _ws()
    ws.settings.sandbox = available_sandbox()
    n = sandbox.MAX_SPOOL_REQUESTS + 500
    ws.put_file(
        "p.py",
        f"import workspace_api as w\nfor i in range({n}): w.send_mail('b@firm.com', str(i), 'x')\n".encode(),
    )
    out, err = tools.call_tool(ws, "run_command", {"command": "python p.py"})
    assert err is None
    assert f"500 requests after the first {sandbox.MAX_SPOOL_REQUESTS} were not applied" in out, out
    sent = [m for m in ws.mail if m.folder == "Sent"]
    assert len(sent) == sandbox.MAX_SPOOL_REQUESTS
    assert sent[-1].msg_id == f"sent-{sandbox.MAX_SPOOL_REQUESTS:04d}"


@needs_sandbox
def test_files_the_copy_back_never_reached_keep_their_content_when_the_entry_cap_is_hit():
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.settings.sandbox = available_sandbox()
    ws.put_file("aaa/important.txt", b"keep me")
    ws.put_file(
        "p.py", b"import os\nos.makedirs('out')\nfor i in range(10001): open(f'out/{i}', 'w').close()\n"
    )
    out, err = tools.call_tool(ws, "run_command", {"command": "python p.py"})
    assert err is None and "more than 10000 entries" in out, out
    assert ws.files["aaa/important.txt"].data == b"keep me"
    assert "p.py" in ws.files


@needs_sandbox
@pytest.mark.parametrize("kind", ["direct", "mcp"])
def test_the_loop_records_the_files_each_program_changed_on_its_call(kind):
    ws = _ws()
    ws.put_file("old.csv", b"a,b\n")
    program = "rm old.csv && mkdir -p out && printf 240 > out/result.txt && printf '' > empty.txt"
    calls = [
        ("run_command", {"command": program}),
        ("read_file", {"path": "out/result.txt"}),
        ("run_command", {"command": "true"}),
    ]
    session = transport.connect(ws, kind)
    try:
        opening = [Message(role="system", content="s"), Message(role="user", content="u")]
        episode = asyncio.run(run_episode(Scripted(calls), opening, session, max_steps=3, seed=None))
    finally:
        session.close()
    changed, read, idle = episode.calls
    # In the order the copy-back applied them: the deletion first, then the files written.
    assert changed.file_effects == [
        FileEffect.removed("old.csv"),
        FileEffect.written("empty.txt", b""),
        FileEffect.written("out/result.txt", b"240"),
    ]
    assert read.file_effects == [] and idle.file_effects == []
    # Left out of the record where there are none, so those calls keep the bytes they had.
    assert "file_effects" not in json.loads(read.model_dump_json())
    assert json.loads(changed.model_dump_json())["file_effects"][0] == {"path": "old.csv", "deleted": True}


@needs_sandbox
def test_past_the_record_bound_a_file_is_recorded_by_its_sha256_alone(monkeypatch):
    monkeypatch.setattr(effects, "RECORDED_EFFECT_BYTES", 10)
    session = transport.connect(_ws(), "direct")
    session.call("run_command", {"command": "printf 123456 > a.txt; printf 1234 > b.txt; printf 12 > c.txt"})
    # Smallest first within the bound: c (2) and b (4) keep their bytes, a (6) would pass it.
    by_path = {e.path: e for e in session.file_effects()}
    assert by_path["a.txt"] == FileEffect.written("a.txt", b"123456", keep_bytes=False)
    assert by_path["a.txt"].data is None and by_path["a.txt"].sha256
    assert (by_path["b.txt"].content(), by_path["c.txt"].content()) == (b"1234", b"12")
    # The bound is the session's: a later call finds 4 bytes left.
    session.call("run_command", {"command": "printf 12345 > d.txt; printf 123 > e.txt"})
    assert [(e.path, e.content()) for e in session.file_effects()] == [("d.txt", None), ("e.txt", b"123")]
