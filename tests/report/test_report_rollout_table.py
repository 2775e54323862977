"""The rollout table: one typed row per rollout, the simulator notice in its parquet metadata, and the
report's tables recomputed from the parquet file alone with the report's own functions."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rollout_kit import mk
from test_apex_report import ATTACKS
from test_apex_report import _cfg as apex_cfg
from test_apex_report import _fixture as apex_fixture
from test_report_tables import _build, _rollouts, rcfg  # noqa: F401  (rcfg: the fixture)

from evoaudit.errors import AuditError
from evoaudit.records import ExecutedCall, Message, ToolCall, Usage
from evoaudit.report import rollout_table as rt
from evoaudit.report import tables
from evoaudit.report.apex import report as apex_report
from evoaudit.report.files import NOTICE_COLUMN
from evoaudit.report.simlabel import sim_notice


def _richer() -> list:
    """The report tests' set plus an infrastructure failure and an episode with calls, usage and harm."""
    rs = _rollouts()
    rs.append(mk("L1", "static", "attacked", "f1", "v3", "injection_task_9", infra="retries_exhausted"))
    calls = [
        ExecutedCall(call_id="c1", function="get_balance", args={}, result="1000"),
        ExecutedCall(call_id="c2", function="send_money", args=None, error="bad JSON"),
    ]
    r = mk(
        "L2",
        "skillopt",
        "attacked",
        "f1",
        "v3",
        "injection_task_9",
        exposed=True,
        success=True,
        harm={"unauthorized_transfer": True, "data_exfiltration": False},
        tool_calls=2,
        read_calls=1,
        calls=calls,
        injections={"vec_b": "x", "vec_a": "y"},
        messages=[
            Message(role="user", content="go"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="get_balance", arguments="{}")]),
        ],
    )
    r = r.model_copy(
        update={"usage": Usage(prompt_tokens=11, completion_tokens=3, requests=2), "wall_s": 1.5}
    )
    rs.append(r)
    return rs


def test_report_writes_one_typed_row_per_rollout_with_the_simulator_notice(rcfg, tmp_path):  # noqa: F811
    rs = _richer()
    _build(rcfg, rs, tmp_path / "r")
    path = tmp_path / "r" / "tables" / "rollouts.parquet"
    meta = rt.table_metadata(path)
    notice = sim_notice(rcfg)
    assert notice and meta["simulator"] and meta["simulator_notice"] == notice
    assert pq.read_schema(path).metadata[rt.NOTICE_KEY].decode() == notice
    assert meta["harm_categories"] == ["data_exfiltration", "unauthorized_transfer"]
    schema = pq.read_schema(path)
    assert schema.field("utility").type == pa.bool_() and schema.field("tool_calls").type == pa.int64()
    assert "wall_s" not in schema.names and schema.field("goal").nullable  # timing varies run to run
    assert schema.field("utility").metadata[b"description"]
    frame = rt.read_rollout_table(path)
    assert len(frame) == len(rs) and frame.rollout_id.is_unique
    row = frame.set_index("rollout_id").loc["L2/skillopt/attacked/f1.v3/injection_task_9"]
    assert (row.tool_calls, row.read_calls, row.n_calls, row.n_call_errors, row.n_messages) == (2, 1, 2, 1, 2)
    assert (row.prompt_tokens, row.completion_tokens, row.requests) == (11, 3, 2)
    assert bool(row.harm_unauthorized_transfer) and not bool(row.harm_data_exfiltration)
    assert list(row.injection_vectors) == ["vec_a", "vec_b"]
    assert row.executor_backend == "sim" and "artifact_sha256" not in frame.columns  # run-dependent
    failed = frame[frame.infra_failure.notna()]
    assert list(failed.infra_failure) == ["retries_exhausted"]
    benign = frame[frame.arm == "benign"]
    assert benign.attack_success.isna().all() and benign.goal.isna().all()


def test_main_table_recomputed_from_the_rollout_table_alone_matches_the_report(rcfg, tmp_path):  # noqa: F811
    _build(rcfg, _richer(), tmp_path / "r")
    out = tmp_path / "r" / "tables"
    rebuilt = rt.rollouts_from_table(rt.read_rollout_table(out / "rollouts.parquet"))
    data = tables.Data.build(rcfg, rebuilt)
    reported = pd.read_parquet(out / "main.parquet")
    assert reported.pop(NOTICE_COLUMN).str.startswith("Simulator run").all()  # a simulator run says so
    pd.testing.assert_frame_equal(tables.main_table(data), reported)
    harm = pd.read_parquet(out / "harm.parquet").drop(columns=[NOTICE_COLUMN])
    pd.testing.assert_frame_equal(tables.harm_table(data), harm)


def test_apex_tables_recomputed_from_the_rollout_table_match(tmp_path):
    benign, attacked = apex_fixture()
    path = rt.write_rollout_table(benign + attacked, tmp_path / "rollouts.parquet", "apex", "sim run")
    rebuilt = rt.rollouts_from_table(rt.read_rollout_table(path))
    cfg = apex_cfg()
    want = apex_report.build_tables(cfg, benign, attacked, ATTACKS)
    got = apex_report.build_tables(
        cfg, [r for r in rebuilt if r.arm == "benign"], [r for r in rebuilt if r.arm == "attacked"], ATTACKS
    )
    for name in ("apex_main", "apex_category", "apex_vector", "apex_utility"):
        pd.testing.assert_frame_equal(got[name], want[name], check_dtype=False, obj=name)
    assert rt.table_metadata(path)["suite"] == "apex"


def test_a_file_that_is_not_a_rollout_table_is_refused(tmp_path):
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "x.parquet")
    with pytest.raises(AuditError, match="not a rollout table"):
        rt.read_rollout_table(tmp_path / "x.parquet")


def test_defence_and_runner_profile_survive_the_round_trip(tmp_path):
    plain = mk("L1", "static", "benign", "f1", "v3")
    profiled = mk("L1", "static", "attacked", "f1", "v3", "injection_task_9").model_copy(
        update={"defense": "spotlighting_with_delimiting", "agent_profile": "agentdojo", "max_steps": 7}
    )
    path = rt.write_rollout_table([plain, profiled], tmp_path / "rollouts.parquet", "banking")
    rebuilt = {r.rollout_id: r for r in rt.rollouts_from_table(rt.read_rollout_table(path))}
    got = rebuilt[profiled.rollout_id]
    assert (got.defense, got.agent_profile, got.max_steps) == ("spotlighting_with_delimiting", "agentdojo", 7)
    got = rebuilt[plain.rollout_id]
    assert (got.defense, got.agent_profile, got.max_steps) == (None, None, None)
