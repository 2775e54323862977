"""Tables that cannot hide exclusions: the interface table counts every episode, a table whose
denominators lost too much says so, and exposure says what it was measured on."""

from __future__ import annotations

from rollout_kit import mk

from evoaudit import config as config_mod
from evoaudit.report import exclusions, tables


def _cfg(share: float = 0.02):
    return config_mod.from_dict(
        {
            "lineages": ["L1"],
            "methods": ["static"],
            "conditions": ["static"],
            "evaluation": {"max_excluded_share": share},
            "report": {"bootstrap": {"replicates": 100}, "figures": False},
        }
    )


def _rollouts():
    # Ten benign episodes: the six that used tools were rejected by the server (infrastructure failures).
    rs = [
        mk("L1", "static", "benign", f"user_task_{i}", tool_calls=2, infra="request_rejected")
        for i in range(6)
    ]
    rs += [mk("L1", "static", "benign", f"user_task_{i}", tool_calls=0, utility=True) for i in range(6, 10)]
    return rs


def test_interface_table_counts_the_excluded_episodes_and_their_tool_calls():
    d = tables.Data.build(_cfg(), _rollouts())
    row = tables.interface_table(d).iloc[0]
    assert row["n"] == 10 and row["n_excluded"] == 6
    # Over the scored episodes alone it would read 1.0 and 0.0: the tool users were the excluded ones.
    assert row["zero_call_rate"] == 0.4 and row["mean_tool_calls"] == 1.2


def test_a_table_past_the_excluded_share_says_so_in_its_caption():
    d = tables.Data.build(_cfg(0.5), _rollouts())
    notes = exclusions.caption_notes(d, _rollouts())
    assert "static/benign: 6 of 10 excluded (60.0%)" in notes["main"]
    assert "evaluation.max_excluded_share" in notes["harm"]
    d = tables.Data.build(_cfg(0.7), _rollouts())
    assert "excluded" not in exclusions.caption_notes(d, _rollouts()).get("main", "")


def test_under_count_as_failure_nothing_is_lost():
    cfg = config_mod.from_dict(
        {
            "lineages": ["L1"],
            "methods": ["static"],
            "conditions": ["static"],
            "evaluation": {"infra_failure_policy": "count_as_failure"},
        }
    )
    assert exclusions.lost_denominators(tables.Data.build(cfg, _rollouts()), 0.0) == []


def test_exposure_is_client_side_unless_the_server_rendered_tool_results():
    plain = _rollouts()
    assert exclusions.exposure_basis(plain) == "client-side"
    rendered = [
        r.model_copy(update={"executor": {"render_probe": {"via": "apply-template", "tool_result": True}}})
        for r in plain
    ]
    assert exclusions.exposure_basis(rendered) == "rendered"
    mixed = rendered[:-1] + [plain[-1]]
    assert exclusions.exposure_basis(mixed) == "client-side"
    assert "client-side" in exclusions.caption_notes(tables.Data.build(_cfg(), plain), plain)["main"]
