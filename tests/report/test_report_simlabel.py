"""A simulator run says what it is in the first lines of every report, and with the cues off the method
effects vanish."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake
from test_report_tables import _build, _rollouts

from evoaudit import config as config_mod
from evoaudit.config import ConfigError
from evoaudit.report.build import TABLES
from evoaudit.report.files import FIGURE_STAMP, NOTICE_COLUMN
from evoaudit.report.rollout_table import NOTICE_KEY
from evoaudit.report.simlabel import sim_notice, simulated_endpoints

_SMALL = {
    "lineages": ["L1", "L2"],
    "methods": ["static", "skillopt"],
    "conditions": ["static", "skillopt", "placebo-skillopt"],
    "report": {"bootstrap": {"replicates": 200}, "figures": False},
}
_REAL = {"backend": "openai", "model": "some-model", "base_url": "http://127.0.0.1:9/v1"}
_REAL_B = _REAL | {"model": "another-model"}  # the transfer check's second executor


def test_every_simulated_endpoint_is_named_and_a_real_run_has_no_notice():
    cfg = config_mod.from_dict({})
    assert simulated_endpoints(cfg) == ["executor", "optimizer", "transfer.executor"]
    assert "mechanism checks set by sim.cues" in sim_notice(cfg)
    real = config_mod.from_dict({"executor": _REAL, "optimizer": _REAL, "transfer": {"executor": _REAL_B}})
    assert simulated_endpoints(real) == [] and sim_notice(real) is None
    # Only the optimizer simulated is still a simulator run; serve-sim over HTTP counts as the simulator.
    served = _REAL | {"model": "evoaudit-sim"}
    mixed = config_mod.from_dict({"executor": served, "transfer": {"enabled": False}})
    assert simulated_endpoints(mixed) == ["executor", "optimizer"]


def test_the_notice_says_when_every_cue_is_off():
    off = yaml.safe_load((REPO / "config" / "examples" / "cues-off.yaml").read_text())
    cfg = config_mod.from_dict(off)
    assert "every cue at strength 0; memory_use 0" in sim_notice(cfg)
    assert "all 8 cues active" in sim_notice(config_mod.from_dict({}))
    one = config_mod.from_dict({"sim": off["sim"] | {"cues": off["sim"]["cues"] | {"verify_details": 0.1}}})
    assert "cues active: verify_details; memory_use 0" in sim_notice(one)


@pytest.mark.parametrize("field", ["executor", "optimizer", "transfer"])
def test_send_seed_false_with_the_simulator_is_a_config_error_naming_field_and_fix(field):
    off = {"send_seed": False}
    raw = {"transfer": {"executor": off}} if field == "transfer" else {field: off}
    name = "transfer.executor" if field == "transfer" else field
    message = rf"{re.escape(name)}\.send_seed: false is not allowed .*set it to true"
    with pytest.raises(ConfigError, match=message):
        config_mod.from_dict(raw, "my.yaml")
    config_mod.from_dict({"executor": _REAL | {"send_seed": False}})  # a real endpoint may omit the seed


def test_report_md_and_every_html_page_open_with_the_simulator_notice(tmp_path):
    cfg = config_mod.from_dict(_SMALL)
    _build(cfg, _rollouts(), tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text().splitlines()
    assert md[0] == "# evoaudit report" and md[2].startswith("**Simulator run (executor, optimizer")
    pages = sorted((tmp_path / "r" / "html").glob("*.html"))
    for page in pages:
        body = page.read_text().split("<body>", 1)[1]
        assert body.startswith("<p class='sim'><strong>Simulator run"), page.name
    real = config_mod.from_dict(
        _SMALL | {"executor": _REAL, "optimizer": _REAL, "transfer": {"executor": _REAL_B}}
    )
    _build(real, _rollouts(), tmp_path / "real")
    assert "Simulator run" not in (tmp_path / "real" / "report.md").read_text()
    assert "Simulator run" not in (tmp_path / "real" / "html" / "main.html").read_text()


def test_index_links_every_page_and_every_page_links_back(tmp_path):
    cfg = config_mod.from_dict(_SMALL | {"report": {"bootstrap": {"replicates": 200}, "figures": True}})
    _build(cfg, _rollouts(), tmp_path / "r")
    html_dir = tmp_path / "r" / "html"
    index = (html_dir / "index.html").read_text()
    links = re.findall(r"href='([^']+)'", index)
    pages = sorted(p.name for p in html_dir.glob("*.html") if p.name != "index.html")
    assert sorted(link for link in links if link.endswith(".html")) == pages
    for link in links:
        assert (html_dir / link).resolve().exists(), link  # figures and report.md too
    for page in pages:
        assert "href='index.html'" in (html_dir / page).read_text(), page


def test_workflow_report_description_is_the_simulator_one_when_any_endpoint_is_simulated():
    rules = (REPO / "workflow" / "rules" / "report.smk").read_text()
    assert 'report: "../report/workflow_sim.rst" if simulated_endpoints(CFG) else' in rules
    first = (REPO / "workflow" / "report" / "workflow_sim.rst").read_text().splitlines()[0]
    assert first.startswith("**Simulator run.**")
    assert "Simulator" not in (REPO / "workflow" / "report" / "workflow.rst").read_text()


# -- the cues-off run ----------------------------------------------------------------------------------


@pytest.mark.slow  # one lineage, four conditions, three goals: about a minute on an idle 2-core machine
def test_with_every_cue_off_the_method_effects_vanish(tmp_path):
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    off = yaml.safe_load((REPO / "config" / "examples" / "cues-off.yaml").read_text())
    copy_workflow(
        tmp_path,
        {
            "lineages": ["L1"],
            "methods": ["static", "skillopt", "awm", "reasoningbank"],
            "conditions": ["static", "skillopt", "reasoningbank", "awm-literal"],
            "suite": {"goals": ["injection_task_4", "injection_task_6", "injection_task_7"]},
            "sim": base["sim"] | off["sim"],
            "report": {"bootstrap": {"replicates": 200}, "figures": False},
            "transfer": {"enabled": False},
        },
    )
    snakemake(tmp_path)
    report = tmp_path / "results" / "report"
    main = pd.read_csv(report / "tables" / "main.csv").set_index("condition")
    static = main.loc["static"]
    for cond in ("skillopt", "reasoningbank", "awm-literal"):
        row = main.loc[cond]
        for col in ("utility", "exposure", "asr", "unauth"):
            assert row[col] == pytest.approx(static[col]), (cond, col)
        assert row["w_to_c"] == 0 and row["c_to_w"] == 0, cond
    md = (report / "report.md").read_text().splitlines()
    assert "every cue at strength 0" in md[2]
    assert Path(report / "html" / "index.html").exists()


# -- the notice in every table file and figure -----------------------------------------------------------


@pytest.mark.parametrize("simulated", [True, False])
def test_a_simulator_runs_tables_and_figures_carry_the_notice_and_a_real_runs_do_not(simulated, tmp_path):
    real = {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}
    cfg = config_mod.from_dict(
        {
            "lineages": ["L1", "L2"],
            "methods": ["static", "skillopt"],
            "conditions": ["static", "skillopt"],
            "report": {"bootstrap": {"replicates": 100}, "figures": True},
            **({} if simulated else {"executor": real, "optimizer": real, "transfer": {"enabled": False}}),
        }
    )
    _build(cfg, _rollouts(), tmp_path / "r")
    out = tmp_path / "r"
    for name in TABLES:
        csv = pd.read_csv(out / "tables" / f"{name}.csv")
        meta = pq.read_schema(out / "tables" / f"{name}.parquet").metadata or {}
        assert (NOTICE_COLUMN in csv.columns) == simulated, name
        assert (NOTICE_KEY in meta) == simulated, name
        if simulated and len(csv):
            assert csv[NOTICE_COLUMN].str.startswith("Simulator run").all(), name
    for svg in sorted((out / "figures").glob("*.svg")):
        assert (FIGURE_STAMP in svg.read_text()) == simulated, svg.name
