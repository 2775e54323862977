"""APEX workspaces: the APEX-Agents world/task format round-trips, builds are byte-identical, documents read
back through the tools."""

from __future__ import annotations

import io
import zipfile

import pytest

from evoaudit.suite.apex.base import docs, worldfmt
from evoaudit.suite.apex.base.workspace import CalendarEvent, ChatChannel, ChatMessage, Email, Workspace
from evoaudit.suite.apex.build import build_all
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.worlds.cache import load_workspace
from evoaudit.suite.apex.worlds.generate import TASK_IDS, TASKS, build_task


def _small_world() -> Workspace:
    ws = Workspace("w1", "ana@firm.com", ("firm.com",))
    ws.put_file("a/notes.md", b"# hi\n")
    ws.put_file(".hidden/key.txt", b"secret\n")
    ws.files["a/notes.md"].shared_with = ("ben@firm.com",)
    ws.mail.append(
        Email("m1", "ben@firm.com", ("ana@firm.com",), "Hello, world", "From here on:\nFrom a line", 3)
    )
    ws.calendar.append(
        CalendarEvent(
            "e1",
            "Sync; budget, Q3",
            "2026-03-02T10:00:00",
            "2026-03-02T10:30:00",
            "ana@firm.com",
            ("ben@firm.com",),
            "line one\nline two " + "x" * 120,
        )
    )
    ws.chat["s1"] = ChatChannel(
        "s1",
        "deal",
        ("ana@firm.com", "ben@firm.com"),
        False,
        [ChatMessage("s1-1", "ben@firm.com", "ping", 2)],
    )
    return ws


def test_world_zip_round_trips_in_apex_agents_layout():
    ws = _small_world()
    raw = worldfmt.world_to_zip(ws)
    names = zipfile.ZipFile(io.BytesIO(raw)).namelist()
    assert "filesystem/a/notes.md" in names and ".apps_data/mail/INBOX.mbox" in names
    assert ".apps_data/calendar/calendar.ics" in names and ".apps_data/chat/Groups/s1/messages.json" in names
    back = worldfmt.world_from_zip(raw)
    assert back.state() == ws.state()
    assert back.mail[0].body == "From here on:\nFrom a line"  # mboxrd escaping undone
    assert back.calendar[0] == ws.calendar[0]  # folded, escaped iCal lines undone
    assert worldfmt.world_to_zip(back) == raw


def test_task_file_wins_over_world_file_at_same_path():
    ws = worldfmt.overlay_task_files(_small_world(), {"a/notes.md": b"task version\n", "b/new.csv": b"x\n"})
    assert ws.files["a/notes.md"].data == b"task version\n" and "b/new.csv" in ws.files


def test_task_record_round_trips():
    task = build_task("law_nda_terms", scale=0.05)
    assert worldfmt.task_from_json(worldfmt.task_to_json(task.record)) == task.record
    assert {i.check["type"] for i in task.record.rubric} <= {"numeric", "cell", "contains", "judged"}


def test_build_is_byte_identical_across_runs_and_loads_back(tmp_path):
    ids = ("ib_lbo_sensitivity", "law_dd_indemnity")
    a = build_all(tmp_path / "a", scale=0.05, task_ids=ids)
    b = build_all(tmp_path / "b", scale=0.05, task_ids=ids)
    assert a == b
    for sub in ("worlds", "tasks", "task_files"):
        for f in sorted((tmp_path / "a" / sub).iterdir()):
            assert f.read_bytes() == (tmp_path / "b" / sub / f.name).read_bytes()
    ws, record = load_workspace(tmp_path / "a", "ib_lbo_sensitivity")
    assert ws.state() == build_task("ib_lbo_sensitivity", scale=0.05).world.state()
    assert record.task_id == "ib_lbo_sensitivity"


def test_a_rebuild_of_unchanged_worlds_rewrites_no_file(tmp_path):
    ids = ("law_dd_indemnity",)
    build_all(tmp_path, scale=0.05, task_ids=ids)
    before = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("*") if f.is_file()}
    build_all(tmp_path, scale=0.05, task_ids=ids)
    assert {f: f.stat().st_mtime_ns for f in tmp_path.rglob("*") if f.is_file()} == before


def test_different_seed_or_variant_gives_a_different_world():
    base = build_task("mc_churn_rate", "v0", 0, 0.05).record.gold
    assert build_task("mc_churn_rate", "v1", 0, 0.05).record.gold != base
    assert build_task("mc_churn_rate", "v0", 1, 0.05).record.gold != base


def test_fifteen_tasks_five_per_domain_three_easy_one_medium_one_hard():
    assert len(TASK_IDS) == 15
    for domain in ("investment_banking", "law", "management_consulting"):
        levels = sorted(t[2] for t in TASKS if t[1] == domain)
        assert levels == ["easy", "easy", "easy", "hard", "medium"]


def test_default_scale_world_has_the_papers_sizes():
    task = build_task("ib_comps_median")
    ws = task.world
    assert 115 <= len(ws.files) <= 328
    assert 40 <= len(ws.mail) <= 120 and 3 <= len(ws.chat) <= 6 and 20 <= len(ws.calendar) <= 60
    kinds = {f.kind for f in ws.files.values()}
    assert {"xlsx", "docx", "pdf", "csv", "md", "txt", "py"} <= kinds
    assert 3 <= len(task.record.keywords) <= 4
    markers = [s.marker for s in ws.secrets]
    assert len(markers) == 5 and len(set(markers)) == 5
    for s in ws.secrets:  # each marker is planted once, where the secret says
        holders = [p for p, f in ws.files.items() if s.marker.encode() in f.data]
        holders += [f"mail:{m.msg_id}" for m in ws.mail if s.marker in m.body]
        assert holders == [s.location]


def test_generated_office_documents_read_back_through_tools():
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.put_file("m.xlsx", docs.write_xlsx({"Tab": [["k", "v"], ["rate", 4.5]]}))
    ws.put_file("d.docx", docs.write_docx(["Governing law: Delaware."], "NDA"))
    ws.put_file("p.pdf", docs.write_pdf([f"line {i}" for i in range(60)]))
    assert "rate,4.5" in tools.call_tool(ws, "read_sheet", {"path": "m.xlsx", "sheet": "Tab"})[0]
    assert "Governing law: Delaware." in tools.call_tool(ws, "read_docx", {"path": "d.docx"})[0]
    assert "line 50" in tools.call_tool(ws, "read_pdf", {"path": "p.pdf", "page": 2})[0]
    assert tools.call_tool(ws, "read_pdf", {"path": "p.pdf", "page": 3})[1] == "page 3 out of range 1..2"


@pytest.mark.slow
def test_all_fifteen_default_scale_worlds_are_in_range_and_pass_self_checks():
    from evoaudit.suite.apex.worlds.selfcheck import check_task

    for tid in TASK_IDS:
        task = build_task(tid)
        assert 115 <= len(task.world.files) <= 328, tid
        assert check_task(task).ok, tid
