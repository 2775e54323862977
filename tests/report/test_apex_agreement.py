"""Judge agreement: the balanced sample, Cohen's kappa, annotating from a stream, the reference set."""

from __future__ import annotations

import io
import json
import math

import pytest
from test_apex_report import _rollout

from evoaudit.errors import AuditError
from evoaudit.report.apex import agreement as ag
from evoaudit.report.apex.report import reference_labels


def test_kappa_matches_hand_computed_values():
    # observed 0.75; chance 0.5·0.5 + 0.5·0.5 = 0.5; kappa = 0.5
    assert ag.cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(
        (0.75 - 0.5) / 0.5
    )
    assert ag.cohen_kappa([True, False], [True, False]) == 1.0
    assert ag.cohen_kappa([True, False], [False, True]) == -1.0
    assert math.isnan(ag.cohen_kappa([True, True], [True, True]))  # chance agreement 1: undefined
    assert math.isnan(ag.cohen_kappa([], []))


def _attacked():
    rs = [_rollout(task=f"t{i}", attack="c1.t1.0", exposed=i % 3 == 0, success=i % 4 == 0) for i in range(12)]
    return rs + [_rollout(task="t99", attack="c6.t1.0", exposed=None, success=False)]


def test_sample_is_balanced_per_kind_and_fixed_by_its_seed():
    items = ag.sample(_attacked(), per_class=2, seed=3)
    for kind in ag.KINDS:
        decided = [ag.decision(r, k) for r, k in items if k == kind]
        assert decided.count(True) == decided.count(False) == 2
    assert [(r.rollout_id, k) for r, k in ag.sample(_attacked(), 2, 3)] == [
        (r.rollout_id, k) for r, k in items
    ]
    # Never more per class than the smaller class holds (3 successes among 13).
    assert sum(k == "safety" for _, k in ag.sample(_attacked(), 10, 0)) == 2 * 3


def test_annotate_reads_answers_from_a_stream_and_resumes_from_the_file(tmp_path):
    items = ag.sample(_attacked(), per_class=1, seed=0)
    out = tmp_path / "labels.jsonl"
    shown = []
    first = ag.annotate(items, io.StringIO("y\nplainly visible\ns\nq\n"), shown.append, out)
    assert len(first) == 1 and first[0].label is True and first[0].rationale == "plainly visible"
    assert "label [y/n" in "".join(shown)
    # A second session skips what is labelled and stops at the end of the answers.
    second = ag.annotate(items, io.StringIO("n\n\nn\n\nn\n\n"), shown.append, out)
    assert len(second) == 3
    saved = ag.read_labels(out)
    assert [(lab.rollout_id, lab.kind) for lab in saved] == [(r.rollout_id, k) for r, k in items]
    assert saved[0].decision == ag.decision(items[0][0], items[0][1])


def test_agreement_table_counts_missing_labels_and_computes_kappa():
    rs = _attacked()
    labels = [ag.Label(r.rollout_id, "exposure", not r.outcome.exposed) for r in rs[:4]]
    labels.append(ag.Label("r9/absent", "exposure", True))
    row = ag.agreement(labels, rs, "mine").set_index("kind").loc["exposure"]
    assert (row.n, row.missing, row.agreement, row.kappa) == (4, 1, 0.0, -1.0)


def test_a_bad_label_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"rollout_id": "x", "kind": "harm", "label": True}) + "\n")
    with pytest.raises(AuditError, match="bad.jsonl:1: kind 'harm'"):
        ag.read_labels(path)


def test_the_shipped_reference_labels_are_balanced_and_each_has_a_rationale():
    labels = reference_labels()
    assert len(labels) == 8 and all(len(lab.rationale) > 40 for lab in labels)
    for kind in ag.KINDS:
        assert sorted(lab.decision for lab in labels if lab.kind == kind) == [False, False, True, True]
