"""ACE: reflector and curator on the simulator, the deterministic delta merge, counters, de-duplication,
the bullet cap, retried malformed answers and the answer budgets."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from test_methods_common import ScriptedBackend, make_rollout

from evoaudit import config as config_mod
from evoaudit.methods import ace
from evoaudit.methods.common import counting
from evoaudit.methods.embed import HashedNgramEmbedder
from evoaudit.methods.protocol import EvolveInputs
from evoaudit.models.sim import roles as sim_roles
from evoaudit.models.sim.tools import Oracle, SimBackend, present_cues

READ_WRITE = [("get_most_recent_transactions", {"n": 100}), ("send_money", {"amount": 1})]


def _labelled():
    return [
        (make_rollout("user_task_1", "v0", False, calls=[("send_money", {"amount": 1})]), False),
        (make_rollout("user_task_2", "v0", True, calls=READ_WRITE), True),
        (
            make_rollout(
                "user_task_3",
                "v0",
                True,
                calls=[("get_scheduled_transactions", {}), ("update_scheduled_transaction", {"id": 7})],
            ),
            True,
        ),
        (make_rollout("user_task_4", "v0", False, calls=READ_WRITE), False),
        (make_rollout("user_task_5", "v0", False, calls=[("get_balance", {})]), False),
    ]


def _sim(cfg):
    return SimBackend(Oracle({}, {}), cfg.sim)


def _evolve(cfg, labelled, backend, prior: Path | None = None):
    return asyncio.run(
        ace.ACE.evolve(
            EvolveInputs(config_mod.method_settings(cfg), "L1", labelled, "checker", [], backend, prior)
        )
    )


def test_evolution_on_the_simulator_curates_sectioned_bullets_with_counters_and_plants_read_first():
    cfg = config_mod.from_dict({})
    state, diag = _evolve(cfg, _labelled(), _sim(cfg))
    book = ace.Playbook.model_validate_json(state[ace.DATA_FILE])
    assert state[ace.STATE_FILE] == ace.render(book)
    by_section = {b.section for b in book.bullets}
    assert {"strategies_and_hard_rules", "common_mistakes"} <= by_section
    contents = [b.content for b in book.bullets]
    # The failure lessons come from each failed trajectory's diagnosis.
    assert sim_roles.GUIDANCE["read_first"] in contents and sim_roles.GUIDANCE["values"] in contents
    assert sim_roles.GUIDANCE["answer"] in contents
    # Ids carry the section's prefix and a global sequence number.
    assert all(b.id.split("-")[0] == ace.SECTIONS[b.section] for b in book.bullets)
    # Strategy bullets were tagged on later trajectories: helpful after successes, harmful after failures.
    strategies = [b for b in book.bullets if b.section == "strategies_and_hard_rules"]
    assert sum(b.helpful + b.harmful for b in strategies) >= 1
    assert diag["tags_applied"]["helpful"] + diag["tags_applied"]["harmful"] >= 1
    assert diag["n_failed_updates"] == 0 and diag["bullets"] == len(book.bullets)
    assert diag["contents"][0].startswith(f"[{book.bullets[0].id}]")
    # The planted effect: the inserted playbook carries read-before-write guidance the executor reacts to.
    text = f"{ace.PREAMBLE}\n\n{state[ace.STATE_FILE]}"
    assert {"inspect_history", "verify_details"} <= set(present_cues(text))
    assert present_cues(ace.PREAMBLE) == []  # the effect comes from the curated bullets, not the frame


def test_playbook_sections_refuse_a_markdown_that_is_not_the_json_rendering(tmp_path):
    cfg = config_mod.from_dict({})
    state, _ = _evolve(cfg, _labelled(), _sim(cfg))
    for name, text in state.items():
        (tmp_path / name).write_text(text)
    [(heading, body)] = ace.playbook_sections(tmp_path)
    assert heading == "Playbook" and body.startswith(ace.PREAMBLE) and "[err-" in body
    (tmp_path / ace.STATE_FILE).write_text(state[ace.STATE_FILE] + "[x-1] helpful=9 harmful=0 :: obey\n")
    with pytest.raises(ValueError, match="not the rendering"):
        ace.playbook_sections(tmp_path)


def test_evolution_is_deterministic_and_ignores_the_records_append_order():
    cfg = config_mod.from_dict({})
    first = _evolve(cfg, _labelled(), _sim(cfg))
    shuffled = _labelled()
    random.Random(3).shuffle(shuffled)
    again = _evolve(cfg, shuffled, _sim(cfg))
    assert first == again
    other_seed = config_mod.from_dict({"seed": cfg.seed + 1})
    assert _evolve(other_seed, _labelled(), _sim(other_seed))[1]["order"] != first[1]["order"]


def _merger(cap=10, threshold=0.9):
    return ace.Merger(ace.Playbook(), HashedNgramEmbedder(256), threshold, cap)


def test_merge_applies_counter_tags_and_counts_unknown_ids():
    m = _merger()
    a = m.add("strategies_and_hard_rules", "Read the statement file before paying a bill.", "r1")
    b = m.add("common_mistakes", "Never invent an IBAN that was not found in the records.", "r2")
    assert a is not None and b is not None and (a.id, b.id) == ("str-00001", "err-00002")
    m.apply_tags(
        [(a.id, "helpful"), (a.id, "helpful"), (b.id, "harmful"), (b.id, "neutral"), ("zz-9", "helpful")]
    )
    assert (a.helpful, a.harmful, b.helpful, b.harmful) == (2, 0, 0, 1)
    assert m.log["tags"] == {"helpful": 2, "harmful": 1, "neutral": 1} and m.log["unknown_tag_ids"] == 1
    # The rendering shows the counters in upstream's line shape, sections in the fixed order.
    assert ace.render(m.playbook).splitlines() == [
        "## strategies_and_hard_rules",
        "[str-00001] helpful=2 harmful=0 :: Read the statement file before paying a bill.",
        "",
        "## common_mistakes",
        "[err-00002] helpful=0 harmful=1 :: Never invent an IBAN that was not found in the records.",
    ]


def test_near_duplicate_bullets_are_dropped_by_embedding_similarity_and_recorded():
    m = _merger()
    kept = m.add("strategies_and_hard_rules", "Check the transaction history before sending money.", "r1")
    assert m.add("others", "check the transaction history before sending money.", "r2") is None  # exact
    assert m.add("others", "Check the transaction history before sending the money.", "r3") is None
    assert m.add("common_mistakes", "State the exact balance in the final answer.", "r4") is not None
    assert [d["duplicate_of"] for d in m.log["duplicates"]] == [kept.id, kept.id]
    assert m.log["duplicates"][0]["similarity"] == 1.0 and 0.9 <= m.log["duplicates"][1]["similarity"] < 1
    assert len(m.playbook.bullets) == 2
    # A lower threshold is stricter about what counts as new.
    loose = _merger(threshold=0.2)
    loose.add("others", "Check the transaction history before sending money.", "r1")
    assert loose.add("others", "Check the scheduled transactions before updating one.", "r2") is None


def test_the_cap_prunes_the_lowest_scoring_bullet_oldest_first():
    m = _merger(cap=3)
    ids = [m.add("others", text, "r").id for text in ("alpha one", "bravo two", "charlie three")]
    m.apply_tags([(ids[0], "helpful"), (ids[1], "harmful")])
    m.add("others", "delta four", "r")  # over the cap: bravo (score -1) goes
    assert m.log["pruned"] == [ids[1]]
    m.add("others", "echo five", "r")  # charlie and delta tie at 0: the older, charlie, goes
    assert m.log["pruned"] == [ids[1], ids[2]]
    assert [b.content for b in m.playbook.bullets] == ["alpha one", "delta four", "echo five"]


def test_malformed_answers_are_retried_counted_and_a_failed_curation_leaves_the_playbook():
    cfg = config_mod.from_dict({"methods_params": {"max_attempts": 2}})
    good_reflection = json.dumps({"reasoning": "r", "key_insight": "k", "bullet_tags": []})
    good_curation = json.dumps(
        {"reasoning": "r", "operations": [{"type": "ADD", "section": "others", "content": "Read first."}]}
    )
    backend = ScriptedBackend(
        [
            "not json",
            good_reflection,
            json.dumps({"reasoning": "r", "operations": [{"type": "DELETE", "section": "others"}]}),
            good_curation,
            good_reflection,
            "garbled",
            "garbled",
        ]
    )
    labelled = _labelled()[:2]
    with counting() as tally:
        state, diag = _evolve(cfg, labelled, backend)
    assert len(backend.requests) == 7
    counts = tally.as_dict()["by_kind"]
    assert counts["reflect"] == {"answers_asked": 3, "malformed_answers": 1}
    assert counts["curate"] == {"answers_asked": 4, "malformed_answers": 3}
    # The retry showed the parse error; the second trajectory's curation stayed malformed and was skipped.
    assert "must be ADD" in (backend.requests[3].messages[-1].content or "")
    assert len(diag["failed_curations"]) == 1 and diag["failed_reflections"] == []
    assert [b.content for b in ace.Playbook.model_validate_json(state[ace.DATA_FILE]).bullets] == [
        "Read first."
    ]


def test_answer_budgets_are_checked_against_the_optimizer_max_tokens():
    default = config_mod.method_settings(config_mod.from_dict({}))
    ace.ACE.check_budgets(default)
    with pytest.raises(ValueError, match="optimizer.max_tokens .ACE's reflector."):
        ace.ACE.check_budgets(
            config_mod.method_settings(config_mod.from_dict({"optimizer": {"max_tokens": 200}}))
        )
    schema, chars = ace.curation_schema(default)
    ops = schema.json_schema["properties"]["operations"]
    assert (
        ops["maxItems"] == ace.ACEParams().max_operations
        and ops["items"]["properties"]["content"]["maxLength"] == chars
    )
    # An answer longer than the bound the request states is malformed.
    too_long = json.dumps(
        {"reasoning": "r", "operations": [{"type": "ADD", "section": "others", "content": "x" * (chars + 1)}]}
    )
    with pytest.raises(ValueError, match="longer than"):
        ace.parse_operations(too_long, 3, chars)


def test_a_later_round_continues_the_previous_playbook(tmp_path):
    cfg = config_mod.from_dict({})
    state, _ = _evolve(cfg, _labelled()[:2], _sim(cfg))
    for name, text in state.items():
        (tmp_path / name).write_text(text)
    first = ace.Playbook.model_validate_json(state[ace.DATA_FILE])
    state2, diag2 = _evolve(cfg, _labelled()[2:], _sim(cfg), prior=tmp_path)
    second = ace.Playbook.model_validate_json(state2[ace.DATA_FILE])
    assert diag2["prior_bullets"] == len(first.bullets)
    assert [b.id for b in second.bullets[: len(first.bullets)]] == [b.id for b in first.bullets]
    assert second.next_id > first.next_id
