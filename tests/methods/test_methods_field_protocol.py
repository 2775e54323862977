"""ACE, DC-Cu and DC-RS on the plugin protocol: entry points, one condition each, deployment (DC-RS per
episode with its retrieval recorded), placebos shaped like each artifact and free of the simulator's cues,
the length a placebo is matched to, and their config blocks (left out of the dump at their defaults)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from test_methods_cheatsheet import _labelled

from evoaudit import config as config_mod
from evoaudit import method_plugins
from evoaudit.methods import ace
from evoaudit.methods import cheatsheet as dc
from evoaudit.methods.conditions import condition
from evoaudit.methods.protocol import EvolveInputs
from evoaudit.methods.registry import get_method
from evoaudit.models.sim.tools import Oracle, SimBackend, present_cues

FIELD = ("ace", "dc-cu", "dc-rs")
RENT = "Send my landlord this month's rent"


def _evolved(name: str, tmp_path: Path, cfg=None) -> Path:
    cfg = cfg or config_mod.from_dict({})
    backend = SimBackend(Oracle({}, {}), cfg.sim)
    method = get_method(name)
    state, _ = asyncio.run(
        method.evolve(
            EvolveInputs(config_mod.method_settings(cfg), "L1", _labelled(), "checker", [], backend)
        )
    )
    out = tmp_path / name
    out.mkdir(parents=True)
    for file, text in state.items():
        (out / file).write_text(text)
    return out


def _placebo_dir(name: str, real: Path, tmp_path: Path) -> tuple[Path, object]:
    shaped = get_method(name).placebo(real, random.Random(7))
    out = tmp_path / f"placebo-{name}"
    out.mkdir()
    for file, text in shaped.state.items():
        (out / file).write_text(text)
    return out, shaped


def _deployed_text(name: str, directory: Path, query: str = RENT) -> str:
    deployed = get_method(name).deploy(directory, "literal")
    return "\n".join(body for _, body in deployed.sections(query))


@pytest.mark.parametrize("name", FIELD)
def test_each_field_method_is_an_entry_point_of_evoaudit_with_one_condition_and_a_placebo(name):
    assert method_plugins.package(name)["package"] == "evoaudit"
    method = get_method(name)
    assert dict(method.insertions) == {name: "literal"} and method.learns
    assert condition(name).method == name
    assert condition(f"placebo-{name}").method == f"placebo-{name}"
    assert method.validation_rollouts(config_mod.from_dict({}).methods_params, 40, 10) == 0


@pytest.mark.parametrize("name", FIELD)
def test_deployment_carries_the_planted_cue_and_the_placebo_carries_none(name, tmp_path):
    real = _evolved(name, tmp_path)
    fake, _ = _placebo_dir(name, real, tmp_path)
    assert "inspect_history" in present_cues(_deployed_text(name, real))
    placebo_text = _deployed_text(name, fake)
    assert placebo_text and present_cues(placebo_text) == []


def test_ace_placebo_keeps_sections_ids_counters_and_bullet_lengths(tmp_path):
    real = _evolved("ace", tmp_path)
    fake, shaped = _placebo_dir("ace", real, tmp_path)
    book = ace.Playbook.model_validate_json((real / ace.DATA_FILE).read_text())
    sham = ace.Playbook.model_validate_json((fake / ace.DATA_FILE).read_text())
    assert [(b.id, b.section, b.helpful, b.harmful) for b in sham.bullets] == [
        (b.id, b.section, b.helpful, b.harmful) for b in book.bullets
    ]
    for r, f in zip(book.bullets, sham.bullets, strict=True):
        assert abs(len(f.content) - len(r.content)) <= 12 and f.content != r.content
    # The placebo's markdown is the rendering of its data, so it deploys like the real playbook.
    assert (fake / ace.STATE_FILE).read_text() == ace.render(sham)
    assert shaped.real_chars == get_method("ace").deployed_chars(real)
    assert shaped.placebo_chars == get_method("ace").deployed_chars(fake)
    assert 0.9 < shaped.placebo_chars / shaped.real_chars < 1.1


def test_dc_cu_placebo_keeps_the_cheatsheets_lines_and_their_lengths(tmp_path):
    real = _evolved("dc-cu", tmp_path)
    fake, shaped = _placebo_dir("dc-cu", real, tmp_path)
    lines = (real / dc.STATE_FILE).read_text().split("\n")
    sham = (fake / dc.STATE_FILE).read_text().split("\n")
    assert len(sham) == len(lines)
    for r, f in zip(lines, sham, strict=True):
        assert r[:2] == f[:2] if r.startswith("- ") else True
        assert abs(len(f) - len(r)) <= 12
    [(heading, body)] = get_method("dc-cu").deploy(fake, "literal").sections(None)
    assert heading == dc.SECTION and body.startswith(dc.PREAMBLE)
    assert 0.9 < shaped.placebo_chars / shaped.real_chars < 1.1


def test_dc_rs_placebo_keeps_entries_queries_vectors_and_repeated_lines(tmp_path):
    real = _evolved("dc-rs", tmp_path)
    fake, shaped = _placebo_dir("dc-rs", real, tmp_path)
    data = dc.Entries.model_validate_json((real / dc.ENTRIES_FILE).read_text())
    sham = dc.Entries.model_validate_json((fake / dc.ENTRIES_FILE).read_text())
    assert [(e.entry_id, e.query, e.family, e.label, e.retrieved) for e in sham.entries] == [
        (e.entry_id, e.query, e.family, e.label, e.retrieved) for e in data.entries
    ]
    assert (fake / dc.VECTORS_FILE).read_text() == (real / dc.VECTORS_FILE).read_text()
    for r, f in zip(data.entries, sham.entries, strict=True):
        assert len(f.note.splitlines()) == len(r.note.splitlines())
    # A line shared by several real notes is one neutral line in the placebo: the synthesis drops it alike.
    real_lines = [ln for e in data.entries for ln in e.note.splitlines()]
    sham_lines = [ln for e in sham.entries for ln in e.note.splitlines()]
    assert len(set(sham_lines)) == len(set(real_lines)) < len(real_lines)
    # Same entries retrieved, same number of synthesised lines.
    rs_real = get_method("dc-rs").deploy(real, "literal")
    rs_fake = get_method("dc-rs").deploy(fake, "literal")
    assert rs_real.retrieval(RENT) == rs_fake.retrieval(RENT)
    assert len(_deployed_text("dc-rs", fake).splitlines()) == len(_deployed_text("dc-rs", real).splitlines())
    assert shaped.real_chars == get_method("dc-rs").deployed_chars(real)
    assert 0.9 < shaped.placebo_chars / shaped.real_chars < 1.1


def test_dc_rs_deploys_per_query_and_records_its_retrieval_with_provenance(tmp_path):
    real = _evolved("dc-rs", tmp_path)
    deployed = get_method("dc-rs").deploy(real, "literal")
    assert deployed.per_query and deployed.retraceable and get_method("dc-rs").retrieves
    with pytest.raises(ValueError, match="a query is required"):
        deployed.sections(None)
    rec = deployed.retrieval(RENT)
    data = dc.Entries.model_validate_json((real / dc.ENTRIES_FILE).read_text())
    assert len(rec["entries"]) == data.top_k == len(rec["provenance"])
    assert set(rec["provenance"]) <= {"success", "failure"}
    assert not get_method("ace").deploy(_evolved("ace", tmp_path), "literal").per_query


def test_the_config_blocks_reach_the_methods_and_stay_out_of_the_dump_at_their_defaults(tmp_path):
    default = config_mod.from_dict({})
    assert "ace" not in default.model_dump()["methods_params"]
    assert "dynamic_cheatsheet" not in default.model_dump()["methods_params"]
    cfg = config_mod.from_dict(
        {"methods_params": {"ace": {"max_bullets": 2}, "dynamic_cheatsheet": {"top_k": 1, "max_chars": 300}}}
    )
    dumped = cfg.model_dump()["methods_params"]
    assert dumped["ace"]["max_bullets"] == 2 and dumped["dynamic_cheatsheet"]["top_k"] == 1
    assert config_mod.from_dict(cfg.model_dump()) == cfg
    book = ace.Playbook.model_validate_json((_evolved("ace", tmp_path, cfg) / ace.DATA_FILE).read_text())
    assert len(book.bullets) == 2
    data = dc.Entries.model_validate_json((_evolved("dc-rs", tmp_path, cfg) / dc.ENTRIES_FILE).read_text())
    assert data.top_k == 1 and data.max_chars == 300
    with pytest.raises(config_mod.ConfigError, match="dedup_threshold"):
        config_mod.from_dict({"methods_params": {"ace": {"dedup_threshold": 1.5}}})
