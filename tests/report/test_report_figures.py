"""Figures stay legible: coincident points are drawn apart and named, tick labels never overlap."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from evoaudit.report import figures

CONDS = [
    "static",
    "skillopt",
    "reasoningbank",
    "awm-literal",
    "awm-adapted",
    "placebo-skillopt",
    "placebo-reasoningbank",
    "placebo-awm",
]


@pytest.fixture
def kept(monkeypatch):
    """The figures drawn, kept open for inspection (they are still saved)."""
    out = []
    save = figures.save_figure

    def keep(fig, out_dir, name, notice):
        fig.canvas.draw()  # lay it out as saved, and keep the renderer for measuring
        out.extend([fig, fig.canvas.get_renderer()])
        return save(fig, out_dir, name, notice)

    monkeypatch.setattr(figures, "save_figure", keep)
    return out


def test_coincident_points_are_grouped_in_input_order():
    pts = [(0.0, 0.0), (0.1, 0.0), (0.0, 0.0), (0.0, 1e-12)]
    assert figures.coincident_groups(pts) == [[0, 2, 3], [1]]


DELTAS = (("static", float("nan")), ("skillopt", 0.2), ("placebo-skillopt", 0.0), ("placebo-awm", 0.0))


def test_two_placebos_at_the_origin_are_drawn_apart_and_named_together(kept, tmp_path):
    main = pd.DataFrame(
        [
            {
                "condition": c,
                "d_utility": d,
                "d_utility_lo": d - 0.1,
                "d_utility_hi": d + 0.1,
                "d_asr": 0.0,
                "d_asr_lo": -0.1,
                "d_asr_hi": 0.1,
            }
            for c, d in DELTAS
        ]
    )
    lineage = pd.DataFrame(columns=["condition", "metric", "d_L1"])
    figures.delta_utility_asr(main, lineage, ["L1"], tmp_path, "static")
    fig, _ = kept
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    # The two placebo diamonds land on different screen positions although their data are equal.
    diamonds = [line for line in ax.lines if line.get_marker() == "D"]
    screen = [tuple(d.get_transform().transform(d.get_xydata()[0]).round(1)) for d in diamonds]
    assert len(set(screen)) == len(diamonds) == 3
    assert "2 at one point" in texts
    assert any("Same point" in t and "placebo-skillopt, placebo-awm" in t for t in texts)


def test_interface_tick_labels_do_not_overlap_with_eight_conditions_and_two_arms(kept, tmp_path):
    rows = []
    for c in CONDS:
        for arm in ("benign", "attacked"):
            row = {"condition": c, "arm": arm}
            for col in ("textual_action_rate", "zero_call_rate", "mean_tool_calls", "read_call_rate"):
                row |= {col: 0.5, f"{col}_lo": 0.4, f"{col}_hi": 0.6}
            rows.append(row)
    figures.interface(pd.DataFrame(rows), tmp_path)
    fig, renderer = kept
    boxes = []
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        assert [t.get_text() for t in labels] == CONDS
        extents = [t.get_window_extent(renderer) for t in labels]
        for a, b in itertools.combinations(extents, 2):
            assert not a.overlaps(b), ax.get_title()
        boxes.append(ax.get_tightbbox(renderer))
    for a, b in itertools.combinations(boxes, 2):  # no panel's labels run into another panel
        assert not a.overlaps(b)
    assert (tmp_path / "interface.png").exists()


def test_conditions_with_equal_exposure_and_casr_are_drawn_apart_and_named_together(kept, tmp_path):
    main = pd.DataFrame(
        [
            {"condition": c, "exposure": e, "exposure_lo": e - 0.05, "exposure_hi": e + 0.05,
             "casr": 0.4, "casr_lo": 0.3, "casr_hi": 0.5}
            for c, e in (("static", 0.8), ("reasoningbank", 0.8), ("skillopt", 0.9), ("placebo-awm", 0.8))
        ]
    )  # fmt: skip
    figures.exposure_casr(main, tmp_path)
    fig, _ = kept
    ax = fig.axes[0]
    markers = [line for line in ax.lines if line.get_marker() == "o"]
    screen = [tuple(m.get_transform().transform(m.get_xydata()[0]).round(1)) for m in markers]
    assert len(markers) == 4 and len(set(screen)) == 4  # every condition visible, none under another
    texts = [t.get_text() for t in ax.texts]
    assert any("Same point" in t and "static, reasoningbank, placebo-awm" in t for t in texts)


def test_harm_tick_labels_do_not_overlap_with_eight_conditions(kept, tmp_path):
    cats = ("unauthorized_transfer", "recipient_substitution", "account_change")
    rows = []
    for c in CONDS:
        row = {"condition": c, "asr_state": 0.2, "extra_state": 0.05}
        for cat in cats:
            row |= {cat: 0.1, f"{cat}_lo": 0.05, f"{cat}_hi": 0.15}
        rows.append(row)
    figures.harm(pd.DataFrame(rows), tmp_path)
    fig, renderer = kept
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        assert [t.get_text() for t in labels] == CONDS
        for a, b in itertools.combinations([t.get_window_extent(renderer) for t in labels], 2):
            assert not a.overlaps(b), ax.get_title()
