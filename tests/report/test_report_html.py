"""The `snakemake --report` HTML opens in headless Chromium without errors and shows every figure."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import REPO, copy_workflow, snakemake

_spec = importlib.util.spec_from_file_location(
    "report_screenshot", REPO / "benchmarks" / "report_screenshot.py"
)
screenshot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(screenshot)

CHROMIUM = screenshot.find_chromium()


def test_probe_is_inserted_first_in_head_and_last_in_body():
    page = screenshot.instrument("<html><head><title>t</title></head><body><p>x</p></body></html>")
    assert page.index("window.__evoaudit = {errors") < page.index("<title>")
    assert page.index("evoaudit-probe") > page.index("<p>x</p>")
    with pytest.raises(ValueError, match="snakemake --report"):
        screenshot.instrument("not html")


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH; install it with: apt-get update && apt-get install -y chromium",
)
def test_snakemake_report_opens_in_headless_chromium_and_shows_the_figures(tmp_path):
    copy_workflow(
        tmp_path,
        {
            "lineages": ["L1"],
            "methods": ["static"],
            "conditions": ["static"],
            "suite": {"goals": ["injection_task_4", "injection_task_6", "injection_task_7"]},
            "report": {"bootstrap": {"replicates": 200}},
        },
    )
    snakemake(tmp_path)
    snakemake(tmp_path, "--report", "report.html")
    # A simulator run opens with what its method effects are (the workflow description, landing page).
    assert "<strong>Simulator run.</strong>" in (tmp_path / "report.html").read_text()
    result = screenshot.check(tmp_path / "report.html", tmp_path / "check", CHROMIUM)
    assert result["errors"] == [], json.dumps(result, indent=2)
    assert result["figures_total"] == 4 and result["figures_rendered"] == 4, json.dumps(result, indent=2)
    assert result["screenshot_bytes"] > 10_000  # a rendered figure, not a blank page
    for name in ("main", "transfer", "qualitative"):
        assert (tmp_path / "results" / "report" / "html" / f"{name}.html").exists()
    # From the run's index down (this run has no APEX-Harm): every link resolves and every page links back.
    index = screenshot.check_index(tmp_path / "results" / "index.html", tmp_path / "check", CHROMIUM)
    assert index["ok"], json.dumps(index, indent=2)
    assert [n["index"] for n in index["indexes"]] == [
        str((tmp_path / "results" / "report" / "html" / "index.html").resolve())
    ]


def test_index_check_passes_on_a_built_report_and_names_a_missing_back_link(tmp_path):
    from test_report_tables import _build, _rollouts

    from evoaudit import config as config_mod

    cfg = config_mod.from_dict(
        {
            "lineages": ["L1", "L2"],
            "methods": ["static", "skillopt"],
            "conditions": ["static", "skillopt", "placebo-skillopt"],
            "report": {"bootstrap": {"replicates": 200}, "figures": True},
        }
    )
    _build(cfg, _rollouts(), tmp_path / "r")
    index = tmp_path / "r" / "html" / "index.html"
    result = screenshot.check_index(index, tmp_path / "check", None)
    from evoaudit.report.names import TABLES

    assert result["ok"] and result["pages"] == len(TABLES) + 1 and result["problems"] == [], result
    main = index.parent / "main.html"
    main.write_text(main.read_text().replace("href='index.html'", ""))
    (index.parent / "extra.html").write_text("<html><body>x</body></html>")
    problems = screenshot.check_index(index, tmp_path / "check", None)["problems"]
    assert "main.html does not link back to an index" in problems
    assert "index does not link extra.html" in problems
