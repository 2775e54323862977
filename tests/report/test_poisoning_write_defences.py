"""The poisoning report's write-defences table (report.poisoning.write_defences_table) on hand-built
records: per screen, poisoned episodes dropped of all poisoned (recall) and benign episodes dropped of all
benign (false drops), counted from the screen's own flags, with the contamination of the poisoned lineage's
artifacts beside them."""

from __future__ import annotations

import pandas as pd
import pytest

from evoaudit.records import (
    ArtifactContamination,
    ContaminationReport,
    DroppedTrajectory,
    ScreenFlag,
    WriteScreenRecord,
)
from evoaudit.report.poisoning import write_defences_table
from evoaudit.report.stats import wilson

LINEAGE, TWIN, SHA = "L1-persist_recipient-s50", "L1", "a" * 64


def _artifact(lineage: str, method: str, k: int, n: int) -> ArtifactContamination:
    return ArtifactContamination(
        lineage=lineage, method=method, artifact_sha256="b" * 64, units=n, contaminated_units=k,
        exact_units=0, near_units=0, identifier_units=k, hits=[],
    )


def _report(poisoned: list[str]) -> ContaminationReport:
    return ContaminationReport(
        lineage=LINEAGE, twin=TWIN, goal="persist_recipient", share=0.5, acquisition_sha256=SHA,
        poisoned_episodes=poisoned, identifiers=[], params={},
        artifacts=[_artifact(LINEAGE, "awm", 2, 10), _artifact(LINEAGE, "reasoningbank", 0, 4),
                   _artifact(TWIN, "awm", 0, 9), _artifact(TWIN, "reasoningbank", 0, 5)],
    )


def _dropped(index: int, screens: list[str]) -> DroppedTrajectory:
    return DroppedTrajectory(
        index=index, rollout_id=f"r{index}", instance_id=f"user_task_{index}",
        flags=[ScreenFlag(screen=s, reason="why") for s in screens],
    )


def _screens(dropped: list[DroppedTrajectory], rollouts: int = 10, sha: str = SHA) -> WriteScreenRecord:
    names = ["instruction_rules", "llm_judge"]
    return WriteScreenRecord(
        lineage=LINEAGE, screens=names, source="acq.jsonl", source_sha256=sha, path="screened.jsonl",
        sha256="c" * 64, rollouts=rollouts, kept=rollouts - len(dropped),
        flagged={s: sum(any(f.screen == s for f in d.flags) for d in dropped) for s in names},
        dropped=dropped, settings={},
    )


def test_recall_and_false_drops_count_each_screens_own_flags_over_poisoned_and_benign_episodes():
    # 10 episodes, r0-r3 poisoned. The rules flag r0, r1 (poisoned) and r7 (benign); the judge r1, r2, r3.
    dropped = [
        _dropped(0, ["instruction_rules"]),
        _dropped(1, ["instruction_rules", "llm_judge"]),
        _dropped(2, ["llm_judge"]),
        _dropped(3, ["llm_judge"]),
        _dropped(7, ["instruction_rules"]),
    ]
    table = write_defences_table([_report(["r0", "r1", "r2", "r3"])], [_screens(dropped)], 0.95)
    assert len(table) == 3 * 2  # (two screens and any) x (the poisoned lineage's two methods)
    got = table.set_index(["screen", "method"])
    rules = got.loc[("instruction_rules", "awm")]
    assert (rules.recall_k, rules.recall_n) == (2, 4)
    assert (rules.false_drop_k, rules.false_drop_n) == (1, 6)
    assert (rules.recall_ci_low, rules.recall_ci_high) == pytest.approx(wilson(2, 4, 0.95))
    judge = got.loc[("llm_judge", "reasoningbank")]
    assert (judge.recall_k, judge.recall_n, judge.false_drop_k, judge.false_drop_n) == (3, 4, 0, 6)
    anyone = got.loc[("any", "awm")]
    assert (anyone.recall_k, anyone.recall_n, anyone.false_drop_k, anyone.false_drop_n) == (4, 4, 1, 6)
    # The contamination is the poisoned lineage's artifact's, the twin's beside it as the control.
    assert (rules.units_k, rules.units_n, rules.twin_units_k, rules.twin_units_n) == (2, 10, 0, 9)
    assert rules.units_rate == pytest.approx(0.2)
    assert set(table.screens_applied) == {"instruction_rules+llm_judge"}


def test_a_screen_that_drops_nothing_has_zero_recall_and_zero_false_drops():
    table = write_defences_table([_report(["r0", "r5"])], [_screens([])], 0.95)
    assert (table.recall_k == 0).all() and (table.recall_n == 2).all()
    assert (table.false_drop_k == 0).all() and (table.false_drop_n == 8).all()
    assert isinstance(table, pd.DataFrame) and (table.recall_ci_high > 0).all()


def test_a_screen_record_of_another_acquisition_file_is_refused():
    with pytest.raises(ValueError, match="rerun write_screen and contamination"):
        write_defences_table([_report(["r0"])], [_screens([], sha="d" * 64)], 0.95)
