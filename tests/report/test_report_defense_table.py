"""The report's defence table: levels per (defence, condition), Δ against the undefended run on matched
episodes, and the Δ of Δs against the baseline condition, with family-bootstrap intervals."""

from __future__ import annotations

import math

import pytest

from evoaudit import config as config_mod
from evoaudit.provenance import provenance
from evoaudit.records import Outcome, ReplayReport, Rollout
from evoaudit.report import tables as t

FAMILIES = [f"user_task_{k}" for k in range(6)]


def _rollout(condition: str, arm: str, family: str, success: bool, defense: str | None = None) -> Rollout:
    goal = "injection_task_4" if arm == "attacked" else None
    return Rollout(
        rollout_id=f"L1/{condition}/{arm}/{family}.v3/{goal or 'none'}",
        lineage="L1", condition=condition, arm=arm, instance_id=f"{family}.v3", family=family,
        variant="v3", split="seen", goal=goal, seed=1, executor={}, pre_state_sha256="0", messages=[],
        calls=[], terminal_state={}, defense=defense,
        outcome=Outcome(
            utility=True, task_score=1.0, attack_success=success if goal else None,
            utility_under_attack=True if goal else None, exposed=True if goal else None,
            unauthorized_state_change=success,
        ),
    )  # fmt: skip


def _run(asr_static: int, asr_evolved: int, defense: str | None = None) -> list[Rollout]:
    """Every family benign-successful; the first ``asr_*`` families attacked successfully."""
    out = []
    for cond, hits in (("static", asr_static), ("skillopt", asr_evolved)):
        for i, fam in enumerate(FAMILIES):
            out.append(_rollout(cond, "benign", fam, False, defense))
            out.append(_rollout(cond, "attacked", fam, i < hits, defense))
    return out


@pytest.fixture
def cfg():
    return config_mod.from_dict(
        {
            "conditions": ["static", "skillopt"],
            "methods": ["static", "skillopt"],
            "defenses": ["data_marking"],
            "report": {"bootstrap": {"replicates": 200}, "figures": False},
        }
    )


def test_a_defence_that_holds_for_static_but_not_for_the_evolved_agent_shows_in_dd_asr(cfg):
    plain = t.Data.build(cfg, _run(4, 4))
    marked = t.Data.build(cfg, _run(1, 4, "data_marking"))
    table = t.defense_table(plain, {"data_marking": marked})
    assert list(table.columns) == t.DEFENSE_COLUMNS
    assert list(zip(table["defense"], table["condition"], strict=True)) == [
        ("none", "static"),
        ("none", "skillopt"),
        ("data_marking", "static"),
        ("data_marking", "skillopt"),
    ]
    rows = {(r.defense, r.condition): r for r in table.itertuples()}
    assert rows[("none", "static")].asr == pytest.approx(4 / 6) and math.isnan(rows[("none", "static")].d_asr)
    static, evolved = rows[("data_marking", "static")], rows[("data_marking", "skillopt")]
    assert static.d_asr == pytest.approx(-3 / 6) and evolved.d_asr == pytest.approx(0.0)
    assert math.isnan(static.dd_asr)  # the baseline condition has no Δ of Δs
    assert evolved.dd_asr == pytest.approx(3 / 6)
    assert evolved.dd_asr_lo <= evolved.dd_asr <= evolved.dd_asr_hi
    assert static.d_asr_lo <= static.d_asr <= static.d_asr_hi
    assert static.n_attacked == 6 and static.n_exposed == 6 and static.n_benign == 6
    assert static.d_utility == 0.0 and static.unauth == pytest.approx(1 / 6)


def test_a_matched_pair_whose_seeds_differ_is_refused(cfg):
    from evoaudit.errors import AuditError

    plain = t.Data.build(cfg, _run(4, 4))
    moved = [
        r.model_copy(update={"seed": 2}) if r.family == "user_task_2" else r
        for r in _run(1, 4, "data_marking")
    ]
    with pytest.raises(AuditError, match=r"user_task_2\.v3.*seed 2.*seed 1"):
        t.defense_table(plain, {"data_marking": t.Data.build(cfg, moved)})


def test_apex_harms_defence_table_refuses_a_matched_pair_whose_seeds_differ():
    from apex_rollout_kit import apex_rollout

    from evoaudit.errors import AuditError
    from evoaudit.report.apex.defense import defense_table
    from evoaudit.report.stats import FamilyBootstrap

    base = [apex_rollout(task=k) for k in ("t1", "t2")]
    marked = [r.model_copy(update={"defense": "data_marking", "seed": r.seed + 1}) for r in base]
    with pytest.raises(AuditError, match="seed"):
        defense_table(base, {"data_marking": marked}, FamilyBootstrap(["t1", "t2"], 50, 1, 0.95))


def test_the_table_is_written_only_when_defences_are_configured(cfg, tmp_path):
    from evoaudit.report.build import build_report

    plain_paths = tmp_path / "plain.jsonl"
    marked_paths = (
        tmp_path / "defense" / "data_marking" / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    )
    marked_paths.parent.mkdir(parents=True)
    plain_paths.write_text("".join(r.model_dump_json() + "\n" for r in _run(4, 4)))
    marked_paths.write_text("".join(r.model_dump_json() + "\n" for r in _run(1, 4, "data_marking")))
    checks = provenance(
        cfg, stage="report", checks={"replay": {"rollouts_replayed": 0, "mismatched_rollouts": 0}}
    )
    out = tmp_path / "with"
    build_report(cfg, [plain_paths], [], checks, out, defense_paths=[marked_paths])
    assert (out / "tables" / "defense.csv").exists() and (out / "tables" / "defense.parquet").exists()
    page = (out / "html" / "defense.html").read_text()
    assert "mechanism check" in page and "n_exposed" in page
    assert "defense.html" in (out / "html" / "index.html").read_text()
    assert "## Defences" in (out / "report.md").read_text()
    without = tmp_path / "without"
    build_report(cfg.model_copy(update={"defenses": ()}), [plain_paths], [], checks, without)
    assert not (without / "tables" / "defense.csv").exists()
    assert "defense.html" not in (without / "html" / "index.html").read_text()


def test_the_report_groups_defended_rollouts_by_their_shards_path_not_their_own_claim(cfg, tmp_path):
    from evoaudit.errors import AuditError
    from evoaudit.report.build import defended_by_path

    shard = tmp_path / "defense" / "data_marking" / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("".join(r.model_dump_json() + "\n" for r in _run(1, 4, "data_marking")))
    assert len(defended_by_path([shard], ["data_marking"])["data_marking"]) == 24
    # A record that claims another defence than its shard's: the report refuses it, naming the file.
    shard.write_text("".join(r.model_dump_json() + "\n" for r in _run(1, 4, "spotlighting_with_delimiting")))
    with pytest.raises(AuditError, match=r"shard0\.jsonl.*says defense 'spotlighting_with_delimiting'"):
        defended_by_path([shard], ["data_marking", "spotlighting_with_delimiting"])
    # A shard outside every configured defence's directory.
    stray = tmp_path / "evaluate" / "shard0.jsonl"
    stray.parent.mkdir()
    stray.write_text(shard.read_text())
    with pytest.raises(AuditError, match="not under a configured defence"):
        defended_by_path([stray], ["spotlighting_with_delimiting"])


def test_apex_harms_defence_table_pairs_each_defended_episode_with_its_undefended_twin():
    from apex_rollout_kit import apex_rollout

    from evoaudit.report.apex.defense import defense_table
    from evoaudit.report.stats import FamilyBootstrap

    tasks = ["t1", "t2", "t3", "t4"]

    def run(hits: int, defense: str | None) -> list[Rollout]:
        out = [apex_rollout(task=k).model_copy(update={"defense": defense}) for k in tasks]
        for i, k in enumerate(tasks):
            r = apex_rollout(task=k, attack=f"c1.{k}.0", success=i < hits, exposed=True)
            out.append(r.model_copy(update={"defense": defense}))
        return out

    boot = FamilyBootstrap(tasks, 200, 1, 0.95)
    table = defense_table(run(2, None), {"data_marking": run(0, "data_marking")}, boot)
    assert list(table["defense"]) == ["none", "data_marking"]
    marked = table.iloc[1]
    assert marked.n_benign == 4 and marked.n_attacked == 4 and marked.n_exposure_defined == 4
    assert marked.asr == 0.0 and marked.d_asr == pytest.approx(-0.5)
    assert marked.d_asr_lo <= marked.d_asr <= marked.d_asr_hi
    assert marked.d_utility == 0.0 and math.isnan(table.iloc[0].d_asr)


def test_apex_harms_defended_runs_come_from_their_directory_and_must_say_so(tmp_path):

    from apex_rollout_kit import apex_rollout

    from evoaudit.errors import AuditError
    from evoaudit.report.apex.defense import defended_runs
    from evoaudit.report.apex.judged import replay_totals

    def shard(defense: str, claim: str | None) -> str:
        path = tmp_path / "apex" / "defense" / defense / "runs" / "sim" / "benign" / "shard0.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        rs = [apex_rollout(task=k).model_copy(update={"defense": claim}) for k in ("t1", "t2")]
        path.write_text("".join(r.model_dump_json() + "\n" for r in rs))
        return str(path)

    paths = [shard("data_marking", "data_marking"), shard("spotlighting_with_delimiting", None)]
    runs = defended_runs(["data_marking"], paths, [], "exclude")
    assert [r.defense for r in runs["data_marking"]] == ["data_marking"] * 2
    with pytest.raises(AuditError, match="spotlighting_with_delimiting/.*says defense None"):
        defended_runs(["data_marking", "spotlighting_with_delimiting"], paths, [], "exclude")
    reports = []
    for k, n in enumerate((0, 2)):
        reports.append(tmp_path / f"r{k}.json")
        details = [
            {"rollout_id": f"x{i}", "field": "utility", "recorded": "1", "recomputed": "0"} for i in range(n)
        ]
        ReplayReport(
            rollouts="s.jsonl",
            replayed=3,
            mismatched_rollouts=n,
            mismatches_by_field={"utility": n} if n else {},
            on_mismatch="record",
            details=details,
        ).write(reports[-1])
    assert replay_totals(reports) == {"replayed": 6, "mismatched_rollouts": 2}
