"""The run's index links every report a configuration builds, and the page checker follows it down."""

from __future__ import annotations

import importlib.util

import pandas as pd
from conftest import REPO

from evoaudit import config as config_mod
from evoaudit.ops import progress
from evoaudit.report import run_index
from evoaudit.report.apex import ablation as apex_ablation
from evoaudit.report.pages import html_page

_spec = importlib.util.spec_from_file_location(
    "report_screenshot", REPO / "benchmarks" / "report_screenshot.py"
)
screenshot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(screenshot)


def _suite_index(path, page):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_page("suite", "x", f"<a href='{page}'>t</a>", back=None))
    (path.parent / page).write_text(html_page("t", "x", ""))


def _run(tmp_path, apex=True):
    results = tmp_path / "results"
    _suite_index(results / run_index.AUDIT_INDEX, "main.html")
    (results / run_index.AUDIT_MARKDOWN).write_text("# report\n")
    if apex:
        _suite_index(results / run_index.APEX_INDEX, "apex_main.html")
        csv = results / "apex" / "report" / "ablations" / "timer.csv"
        frame = pd.DataFrame([{"model": "m", "category": "c1", "asr": 0.5}])
        apex_ablation.write_table("timer", {"timer": False}, frame, csv, None, {})
    cfg = config_mod.from_dict({"apex": {"enabled": apex}})
    run_index.write_run_index(
        results / run_index.RUN_INDEX, "results", apex, ("timer",) if apex else (), run_index.run_notices(cfg)
    )
    return results


def test_the_run_index_links_both_suites_reports_and_every_page_links_back(tmp_path):
    results = _run(tmp_path)
    page = (results / "index.html").read_text()
    for rel, _ in run_index.report_paths(True, ("timer",)):
        assert f"href='{rel}'" in page
    # Both simulator notices (the default configuration runs both suites on the simulator).
    assert page.count("Simulator run") == 2
    result = screenshot.check_index(results / "index.html", tmp_path / "check", None)
    assert result["ok"], result
    assert [n["index"] for n in result["indexes"]] == [
        str((results / run_index.AUDIT_INDEX).resolve()),
        str((results / run_index.APEX_INDEX).resolve()),
    ]
    assert progress.report_locations(results, True, ("timer",))[0] == (results / "index.html").as_posix()


def test_the_page_checker_names_a_missing_report_and_a_page_without_its_back_link(tmp_path):
    results = _run(tmp_path)
    (results / run_index.APEX_INDEX).unlink()
    ablation = results / "apex" / "report" / "ablations" / "timer.html"
    ablation.write_text(ablation.read_text().replace(run_index.INDEX_FROM_ABLATION, "elsewhere.html"))
    problems = screenshot.check_index(results / "index.html", tmp_path / "check", None)["problems"]
    assert f"index links {run_index.APEX_INDEX}, which does not exist" in problems
    assert "apex/report/ablations/timer.html does not link back to an index" in problems


def test_without_apex_the_run_index_links_the_audit_report_alone(tmp_path):
    results = _run(tmp_path, apex=False)
    page = (results / "index.html").read_text()
    assert "apex/" not in page and page.count("Simulator run") == 1
    assert screenshot.check_index(results / "index.html", tmp_path / "check", None)["ok"]
