"""Dynamic Cheatsheet: the cumulative variant's seeded order and bounded rewrite, the retrieval-synthesis
variant's entries, per-episode retrieval and deterministic synthesis, retried malformed answers, budgets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_methods_common import ScriptedBackend, make_rollout

from evoaudit import config as config_mod
from evoaudit.config import EmbedderConfig
from evoaudit.methods import cheatsheet as dc
from evoaudit.methods.common import counting
from evoaudit.methods.embed import HashedNgramEmbedder
from evoaudit.methods.protocol import EvolveInputs
from evoaudit.models.sim import roles as sim_roles
from evoaudit.models.sim.tools import Oracle, SimBackend, present_cues

READ_WRITE = [("get_most_recent_transactions", {"n": 100}), ("send_money", {"amount": 1})]


def _labelled():
    return [
        (
            make_rollout(
                "user_task_1", "v0", False, [("send_money", {"amount": 1})], "Pay the bill in bill.txt"
            ),
            False,
        ),
        (
            make_rollout("user_task_2", "v0", True, READ_WRITE, "Send my landlord the rent for this month"),
            True,
        ),
        (
            make_rollout(
                "user_task_3",
                "v0",
                True,
                [("get_scheduled_transactions", {}), ("update_scheduled_transaction", {"id": 7})],
                "Move my scheduled rent payment to the first of the month",
            ),
            True,
        ),
        (make_rollout("user_task_4", "v0", False, READ_WRITE, "Refund my friend the money she sent"), False),
        (
            make_rollout("user_task_5", "v0", False, [("get_balance", {})], "What is my account balance"),
            False,
        ),
    ]


def _sim(cfg):
    return SimBackend(Oracle({}, {}), cfg.sim)


def _evolve(method, cfg, labelled, backend, prior: Path | None = None):
    return asyncio.run(
        method.evolve(
            EvolveInputs(config_mod.method_settings(cfg), "L1", labelled, "checker", [], backend, prior)
        )
    )


def _params(monkeypatch, **kw):
    params = dc.CheatsheetParams(**kw)
    monkeypatch.setattr(dc, "dc_params", lambda settings: params)
    return params


# -- DC-Cu -----------------------------------------------------------------------------------------


def test_cumulative_cheatsheet_on_the_simulator_gathers_each_trajectorys_lesson_and_plants_read_first(
    tmp_path,
):
    cfg = config_mod.from_dict({})
    state, diag = _evolve(dc.DC_CU, cfg, _labelled(), _sim(cfg))
    sheet = state[dc.STATE_FILE]
    for kind in ("read_first", "values", "answer"):
        assert sim_roles.GUIDANCE[kind] in sheet
    assert "before calling send_money" in sheet and "before calling update_scheduled_transaction" in sheet
    assert diag["updates"] == 5 and diag["n_failed_updates"] == 0 and diag["chars"] == len(sheet)
    assert diag["contents"][0] == sheet.splitlines()[0]
    [(heading, body)] = dc.cheatsheet_sections(_write(tmp_path, state))
    assert heading == "Cheatsheet" and body.startswith(dc.PREAMBLE)
    assert "inspect_history" in present_cues(body) and present_cues(dc.PREAMBLE) == []


def _write(directory: Path, state: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in state.items():
        (directory / name).write_text(text)
    return directory


def test_cumulative_cheatsheet_depends_on_the_seeded_order_and_is_reproducible(monkeypatch):
    # A short bound makes the order matter for content too: the least-seen, oldest lines are dropped.
    _params(monkeypatch, max_chars=420)
    a = config_mod.from_dict({"seed": 1})
    first = _evolve(dc.DC_CU, a, _labelled(), _sim(a))
    assert _evolve(dc.DC_CU, a, list(reversed(_labelled())), _sim(a)) == first  # append order ignored
    sheets = {first[0][dc.STATE_FILE]}
    orders = {tuple(first[1]["order"])}
    for seed in (2, 3, 4, 5):
        cfg = config_mod.from_dict({"seed": seed})
        state, diag = _evolve(dc.DC_CU, cfg, _labelled(), _sim(cfg))
        assert len(state[dc.STATE_FILE]) <= 420
        sheets.add(state[dc.STATE_FILE])
        orders.add(tuple(diag["order"]))
    assert len(orders) > 1 and len(sheets) > 1


def test_a_curator_answer_over_the_bound_is_retried_then_the_previous_cheatsheet_is_kept(monkeypatch):
    _params(monkeypatch, max_chars=60)
    cfg = config_mod.from_dict({"methods_params": {"max_attempts": 2}})
    backend = ScriptedBackend(
        [
            json.dumps({"cheatsheet": "x" * 61}),
            json.dumps({"cheatsheet": "- Look up the history first."}),
            "not json",
            json.dumps({"sheet": "wrong key"}),
        ]
    )
    with counting() as tally:
        state, diag = _evolve(dc.DC_CU, cfg, _labelled()[:2], backend)
    assert state[dc.STATE_FILE] == "- Look up the history first.\n"
    assert "longer than 60 characters" in (backend.requests[1].messages[-1].content or "")
    assert tally.as_dict()["by_kind"]["curate"] == {"answers_asked": 4, "malformed_answers": 3}
    assert diag["n_failed_updates"] == 1 and diag["updates"] == 1
    # The second curation was shown the cheatsheet the first one wrote.
    assert "- Look up the history first." in (backend.requests[2].messages[-1].content or "")


def test_budgets_refuse_a_max_chars_the_optimizer_cannot_write(monkeypatch):
    default = config_mod.method_settings(config_mod.from_dict({}))
    dc.DC_CU.check_budgets(default)
    schema, chars = dc.cheatsheet_schema(default)
    assert (
        schema.json_schema["properties"]["cheatsheet"]["maxLength"]
        == chars
        == dc.CheatsheetParams().max_chars
    )
    small = config_mod.method_settings(config_mod.from_dict({"optimizer": {"max_tokens": 300}}))
    for method in (dc.DC_CU, dc.DC_RS):
        with pytest.raises(ValueError, match="max_chars is 1500"):
            method.check_budgets(small)
    _params(monkeypatch, max_chars=200)
    dc.DC_RS.check_budgets(small)


def test_a_later_round_continues_the_previous_cheatsheet(tmp_path):
    cfg = config_mod.from_dict({})
    state, _ = _evolve(dc.DC_CU, cfg, _labelled()[:1], _sim(cfg))
    _write(tmp_path, state)
    state2, diag2 = _evolve(dc.DC_CU, cfg, _labelled()[1:2], _sim(cfg), prior=tmp_path)
    assert state2[dc.STATE_FILE].startswith(state[dc.STATE_FILE].rstrip("\n"))
    assert diag2["prior_chars"] == len(state[dc.STATE_FILE])


# -- DC-RS -----------------------------------------------------------------------------------------

LOCAL = EmbedderConfig(dims=256)


def _rs_dir(tmp_path: Path, top_k: int = 1, max_chars: int = 500) -> Path:
    entries = [
        dc.Entry(
            entry_id="a", query="Change my account password", family="f0", label=True, note="- A1\n- Z\n"
        ),
        dc.Entry(
            entry_id="b",
            query="Pay my monthly rent to the landlord",
            family="f1",
            label=False,
            note="- B1\n- Z\n",
        ),
        dc.Entry(
            entry_id="c",
            query="Pay the monthly rent to my landlord now",
            family="f1",
            label=True,
            note="- C1\n",
        ),
    ]
    data = dc.Entries(embedder=LOCAL, top_k=top_k, max_chars=max_chars, preamble="P.", entries=entries)
    vectors = HashedNgramEmbedder(LOCAL.dims).embed([e.query for e in entries])
    return _write(tmp_path / "rs", dc.rs_state(data, vectors))


def test_retrieval_picks_the_most_similar_past_queries_per_episode(tmp_path):
    retriever = dc.RSRetriever(_rs_dir(tmp_path, top_k=2))
    rec = retriever.retrieval("Please pay the monthly rent to my landlord")
    assert set(rec["entries"]) == {"b", "c"} and rec["families"] == ["f1", "f1"]
    assert rec["similarity"] == sorted(rec["similarity"], reverse=True)
    assert retriever.retrieval("I need a new account password")["entries"][0] == "a"
    [(heading, body)] = retriever.sections("Please pay the monthly rent to my landlord")
    assert heading == "Cheatsheet" and body.startswith("P.\n\n") and "A1" not in body
    assert "B1" in body and "C1" in body


def test_synthesis_keeps_each_line_once_in_similarity_order_within_the_bound():
    assert dc.synthesise(["- B1\n- Z\n", "- C1\n- z\n"], 100) == "- B1\n- Z\n- C1\n"
    assert dc.synthesise(["- B1\n- Z\n", "- C1\n"], 9) == "- B1\n- Z\n"
    assert dc.synthesise([], 100) == ""


def test_the_retrieval_is_a_pure_function_of_the_frozen_entries_and_the_query_vector(tmp_path):
    directory = _rs_dir(tmp_path, top_k=1)
    data = dc.Entries.model_validate_json((directory / dc.ENTRIES_FILE).read_text())
    vectors = json.loads((directory / dc.VECTORS_FILE).read_text())
    qv = vectors[0]
    sections, hits = dc.rs_sections_for(data, vectors, qv)
    assert [e.entry_id for e, _ in hits] == ["a"] and round(hits[0][1], 6) == 1.0
    assert dc.rs_sections_for(data, vectors, qv) == (sections, hits)
    # Ties go to the earlier entry.
    assert dc.retrieve([[1.0, 0.0], [1.0, 0.0]], [1.0, 0.0], 1) == [(0, 1.0)]


def test_rs_evolution_on_the_simulator_synthesises_each_note_from_its_retrieved_predecessors(tmp_path):
    cfg = config_mod.from_dict({})
    state, diag = _evolve(dc.DC_RS, cfg, _labelled(), _sim(cfg))
    data = dc.Entries.model_validate_json(state[dc.ENTRIES_FILE])
    assert len(data.entries) == 5 == len(json.loads(state[dc.VECTORS_FILE]))
    assert [e.entry_id for e in data.entries] == diag["order"]
    assert data.entries[0].retrieved == []
    for n, entry in enumerate(data.entries[1:], 1):
        earlier = {e.entry_id for e in data.entries[:n]}
        assert entry.retrieved and set(entry.retrieved) <= earlier and len(entry.retrieved) <= data.top_k
        # The simulator keeps the shown notes' lessons and adds this trajectory's.
        shown = {e.entry_id: e for e in data.entries}
        for rid in entry.retrieved:
            for line in shown[rid].note.splitlines():
                lesson = line.removeprefix("- ").split(" (seen")[0]
                assert lesson in entry.note
    assert diag["entries_from_failures"] == 3 and diag["n_failed_updates"] == 0
    # The closing notes show the most widely shared note lines with how many entries carry each.
    counts = [int(c.split(" entries: ")[0]) for c in diag["contents"]]
    assert counts == sorted(counts, reverse=True) and counts[0] >= 2
    # Deployed per episode: a rent request retrieves a note carrying read-before-write guidance.
    body = dc.RSRetriever(_write(tmp_path, state)).sections("Send my landlord this month's rent")[0][1]
    assert "inspect_history" in present_cues(body) and present_cues(dc.RS_PREAMBLE) == []


def test_an_rs_curation_that_stays_malformed_leaves_no_entry_and_is_counted():
    cfg = config_mod.from_dict({"methods_params": {"max_attempts": 2}})
    backend = ScriptedBackend([json.dumps({"cheatsheet": "- one"}), "bad", "bad"])
    with counting() as tally:
        state, diag = _evolve(dc.DC_RS, cfg, _labelled()[:2], backend)
    data = dc.Entries.model_validate_json(state[dc.ENTRIES_FILE])
    assert len(data.entries) == 1 and diag["n_failed_updates"] == 1
    assert tally.as_dict()["by_kind"]["curate"] == {"answers_asked": 3, "malformed_answers": 2}


def test_rs_later_round_appends_to_the_previous_entries(tmp_path):
    cfg = config_mod.from_dict({})
    state, _ = _evolve(dc.DC_RS, cfg, _labelled()[:2], _sim(cfg))
    _write(tmp_path, state)
    state2, diag2 = _evolve(dc.DC_RS, cfg, _labelled()[2:], _sim(cfg), prior=tmp_path)
    data2 = dc.Entries.model_validate_json(state2[dc.ENTRIES_FILE])
    assert diag2["prior_entries"] == 2 and len(data2.entries) == 5
    assert data2.entries[:2] == dc.Entries.model_validate_json(state[dc.ENTRIES_FILE]).entries
