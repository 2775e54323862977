"""The JSON files stages pass each other are typed records: each reads back what it wrote, byte for byte,
reads a file written before it had a schema version, and names the file, field and fix when refusing one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.errors import AuditError
from evoaudit.evaluate.apex import shard as apex_shard
from evoaudit.provenance import provenance, write_provenance
from evoaudit.records import (
    AcquisitionRecord,
    ArtifactMeta,
    CheckerAuditSummary,
    Decisions,
    DeterminismReport,
    FileRecord,
    Instance,
    JudgeFile,
    LineageOpening,
    Manifest,
    ManifestEntry,
    Outcome,
    RecordFileError,
    ReplayReport,
    RunManifest,
    SuiteSpec,
    SupersededEntry,
    UnsealEvent,
    read_provenance,
    read_superseded_log,
    read_unseal_event,
    read_unseal_log,
    superseded_log_line,
    unseal_log_line,
)

H = "a" * 64

RULED = {"value": True, "decided_by": "rule", "judge_request": None, "evidence": "email to x@y"}
OPEN = {
    "value": None,
    "decided_by": "undecided",
    "judge_request": None,
    "evidence": "left to the judge",
    "pending": [{"kind": "exposure", "reference": "payload", "candidate": "text"}],
}
TASK = {
    "value": 0.5,
    "decided_by": "judge",
    "criteria": [
        {"verifier_id": "c1", "passed": True, "decided_by": "rule"},
        {"verifier_id": "c2", "passed": False, "decided_by": "judge", "judge_request": H},
    ],
}
BANKING_SPEC = {
    "suite": "banking",
    "benchmark_version": "v1.2.2",
    "checker_audit_profile": "published",
    "checker_audit_sha256": H,
    "instances_sha256": H,
    "records_sha256": H,
    "endpoint_table": "endpoint.parquet",
    "endpoint_sha256": H,
    "endpoint_records_sha256": H,
    "endpoint_variants": ["v3", "v4", "v5"],
    "variant_probes_sha256": H,
    "families": ["user_task_0"],
    "excluded": {"user_task_8": "vacuous"},
    "official_unchanged": ["user_task_0"],
    "official_only_spurious": [],
    "corrections": {
        "user_task_0": {
            "official_defects": [],
            "extension_defects": ["spurious_action_insensitive"],
            "predicate_kind": "send_money",
            "correction": "pre/post delta",
        }
    },
    "goal_checkers": {"injection_task_4": {"lenient": [], "blind": ["p1"]}},
    "goal_checker_probes": "goal_checker_probes.csv",
    "split": {"user_task_0": "seen"},
    "clusters": {"user_task_0": "payments"},
    "roles": {"v0": "acquisition", "v3": "endpoint"},
    "vectors": {"user_task_0.v0": ["incoming_transaction"]},
}
APEX_SPEC = {
    **BANKING_SPEC,
    "suite": "apex",
    "goal_checker_probes": None,
    "checker_audit_skipped": "no official checkers",
    "apex_worlds_spec_sha256": H,
    "apex_worlds_spec_file_sha256": H,
    "apex_attack_set_sha256": H,
    "apex_attacks": ["c1.t.0"],
    "apex_attack_count": 12,
}
EVENT = {
    "key": "global",
    "scope": "global",
    "manifest_root": H,
    "lineage_roots": {"L1": H},
    "files": {"artifacts/L1/static/meta.json": H},
    "kind": "first",
    "previous_root": None,
    "time": "2026-12-04T10:00:00+00:00",
    "code": {"revision": None, "dirty": None},
}
OPENING = {
    "key": "lineage:L1",
    "scope": "global",
    "lineage": "L1",
    "manifest_root": H,
    "global_root": "b" * 64,
    "unsealed_at": "2026-12-04T10:00:00+00:00",
    "kind": "first",
}
MANIFEST = {
    "entries": [{"path": "artifacts/L1/static/meta.json", "bytes": 10, "sha256": H}],
    "root": H,
    "lineage": "L1",
    "lineage_roots": {},
}
JUDGE = {
    "format": "evoaudit-apex-judge-1",
    "model": "sim",
    "judge": {"backend": "sim", "model": "evoaudit-sim-judge"},
    "asked": 1,
    "decisions": {"r1": {"task_score": TASK, "attack_success": RULED, "exposure": RULED}},
}
VERIFY = {
    "sampled": 2,
    "verified": 1,
    "differing": 1,
    "ignored_fields": ["wall_s"],
    "rollouts": ["L1/static/benign/a", "L1/static/benign/b"],
    "details": [{"rollout_id": "L1/static/benign/b", "shard": "shard0.jsonl", "fields": ["outcome"]}],
}
REPLAY = {
    "rollouts": "results/evaluate/L1/static/benign/shard0.jsonl",
    "replayed": 3,
    "mismatched_rollouts": 1,
    "mismatches_by_field": {"utility": 1},
    "on_mismatch": "record",
    "details": [{"rollout_id": "r1", "field": "utility", "recorded": "True", "recomputed": "False"}],
}
ACQUISITION = {
    "lineage": "L1",
    "path": "results/acquire/L1/rollouts.jsonl",
    "sha256": H,
    "rollouts": 12,
    "successes": 7,
    "infra_failures": 0,
    "executor": {"backend": "sim", "model": "evoaudit-sim"},
}
LATER_ACQUISITION = {**ACQUISITION, "round": 2, "deployed": "results/artifacts/L1/awm", "deployed_sha256": H}
META = {
    "schema_version": 1,  # artifact metas had one from the start
    "method": "skillopt",
    "lineage": "L1",
    "state_files": ["skill.md"],
    "inputs": {"acquisition": H},
    "diagnostics": {"rounds": 3},
}

SORTED = {"indent": 2, "sort_keys": True}
AUDIT_CORE = {"profile": "published", "passing": ["user_task_1"], "excluded": {}}
AUDIT_CORE |= {"failing": {"user_task_0": "vacuous"}}
AUDIT_CORE |= {"defects": {"user_task_0": ["vacuous"], "user_task_1": []}}
BANKING_AUDIT = AUDIT_CORE | {
    "extension": {"user_task_1": ["spurious_action_insensitive"]},
    "extension_csv": "checker_audit_extension.csv",
    "strict_passing": [],
    "goal_checkers": {"injection_task_4": {"lenient": ["p1"], "blind": []}},
    "goal_checker_probes": "checker_audit_goals.csv",
}
SLACK_AUDIT = AUDIT_CORE | {"suite": "slack", "benchmark_version": "v1.2.1", "applicability_rule": "r"}
APEX_AUDIT = {**AUDIT_CORE, "suite": "apex", "skipped": "no official predicates"}
APEX_AUDIT |= {"failing": {}, "passing": [], "defects": {}}
APEX_AUDIT |= {"extension": {}, "strict_passing": [], "goal_checkers": {}}

# (record, the file as it was written before the record existed, how it was written then)
BEFORE = [
    (SuiteSpec, BANKING_SPEC, {"indent": 2, "sort_keys": True}),
    (SuiteSpec, APEX_SPEC, {"indent": 2, "sort_keys": True}),
    (UnsealEvent, EVENT, {"indent": 2, "sort_keys": True}),
    (LineageOpening, OPENING, {"indent": 2, "sort_keys": True}),
    (JudgeFile, JUDGE, {"indent": 1, "sort_keys": True}),
    (ReplayReport, REPLAY, {"indent": 2}),
    (DeterminismReport, VERIFY, {"indent": 2, "sort_keys": True}),
    (AcquisitionRecord, ACQUISITION, {"indent": 2, "sort_keys": True}),
    (AcquisitionRecord, LATER_ACQUISITION, {"indent": 2, "sort_keys": True}),
    (ArtifactMeta, {k: v for k, v in META.items() if k != "schema_version"}, SORTED),
    (CheckerAuditSummary, BANKING_AUDIT, SORTED),
    (CheckerAuditSummary, SLACK_AUDIT, SORTED),
    (CheckerAuditSummary, APEX_AUDIT, SORTED),
]
IDS = [
    "banking-spec",
    "apex-spec",
    "unseal",
    "lineage-opening",
    "judge",
    "replay",
    "verify",
    "acquisition",
    "later-acquisition",
    "artifact-meta",
    "banking-audit",
    "slack-audit",
    "apex-audit",
]


def _run_manifest(tmp_path: Path, monkeypatch) -> dict:
    spec, attacks = tmp_path / "worlds.json", tmp_path / "attacks.json"
    spec.write_text(json.dumps({"sha256": H}))
    attacks.write_text("{}")
    monkeypatch.setattr(apex_shard, "sandbox_info", lambda cfg: {"kind": "none"})
    return apex_shard.run_manifest(config_mod.from_dict({}, "test"), spec, attacks)


@pytest.mark.parametrize(("record", "data", "layout"), BEFORE, ids=IDS)
def test_a_file_written_before_its_record_reads_as_version_1_and_keeps_its_layout(
    tmp_path, record, data, layout
):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data, **layout) + "\n")
    got = record.read(path)
    assert got.schema_version == 1
    # Rewritten, the file is the old one with the schema version added: same keys, order and indentation.
    assert got.dumps() == json.dumps({"schema_version": 1, **data}, **layout) + "\n"


@pytest.mark.parametrize(("record", "data", "layout"), BEFORE, ids=IDS)
def test_every_file_record_reads_back_what_it_wrote_byte_for_byte(tmp_path, record, data, layout):
    path = tmp_path / "r.json"
    written = record.model_validate(data)
    written.write(path)
    assert record.read(path) == written
    assert path.read_text() == written.dumps()
    record.read(path).write(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_a_freeze_manifest_is_written_as_before(tmp_path):
    manifest = Manifest(entries=[ManifestEntry(**e) for e in MANIFEST["entries"]], root=H, lineage="L1")
    manifest.write(tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text()) == {"schema_version": 1, **MANIFEST}
    assert Manifest.read(tmp_path / "m.json") == manifest


def test_the_run_manifest_record_holds_what_the_apex_runs_pin(tmp_path, monkeypatch):
    body = _run_manifest(tmp_path, monkeypatch)
    record = RunManifest.model_validate(body)
    record.write(tmp_path / "run_manifest.json")
    assert json.loads((tmp_path / "run_manifest.json").read_text()) == {"schema_version": 1, **body}
    assert RunManifest.read(tmp_path / "run_manifest.json").models[0].id == body["models"][0]["id"]


def test_the_unseal_reader_tells_an_opening_from_an_event_and_the_log_reads_line_by_line(tmp_path):
    (tmp_path / "e.json").write_text(json.dumps(EVENT))
    (tmp_path / "o.json").write_text(json.dumps(OPENING))
    assert isinstance(read_unseal_event(tmp_path / "e.json"), UnsealEvent)
    assert isinstance(read_unseal_event(tmp_path / "o.json"), LineageOpening)
    log = tmp_path / "unseal_log.jsonl"
    old_line = json.dumps(EVENT, sort_keys=True) + "\n"  # as the log was appended to before
    second = UnsealEvent.model_validate({**EVENT, "kind": "extension", "previous_root": H})
    log.write_text(old_line + unseal_log_line(second))
    assert [e.kind for e in read_unseal_log(log)] == ["first", "extension"]
    assert read_unseal_log(tmp_path / "none.jsonl") == []


def test_the_superseded_log_reads_old_lines_and_appends_typed_ones(tmp_path):
    old = {
        "artifact": "artifacts/L1/static",
        "archived_to": "freeze/superseded/20260101T000000000000Z/L1/static",
        "files": {"meta.json": H},
        "unsealed_root": H,
        "unseal_key": "global",
        "reason": "acquisition record was truncated",
        "time": "2026-01-01T00:00:00+00:00",
        "code": {"revision": "abc", "dirty": False},
    }
    log = tmp_path / "log.jsonl"
    second = SupersededEntry.model_validate({**old, "artifact": "artifacts/L1/placebo-static"})
    log.write_text(json.dumps(old, sort_keys=True) + "\n" + superseded_log_line(second))
    entries = read_superseded_log(log)
    assert [e.artifact for e in entries] == ["artifacts/L1/static", "artifacts/L1/placebo-static"]
    assert superseded_log_line(entries[0]) == json.dumps({"schema_version": 1, **old}, sort_keys=True) + "\n"
    assert read_superseded_log(tmp_path / "none.jsonl") == []
    log.write_text(json.dumps({**old, "reason": None}) + "\n")
    bad = r"log\.jsonl line 1: not a valid SupersededEntry \(field reason:"
    with pytest.raises(RecordFileError, match=bad):
        read_superseded_log(log)


def test_a_newer_schema_version_is_refused_naming_the_file_and_field(tmp_path):
    path = tmp_path / "suite_spec.json"
    path.write_text(json.dumps({**BANKING_SPEC, "schema_version": 2}))
    with pytest.raises(RecordFileError, match=r"suite_spec\.json.*schema_version.*newer"):
        SuiteSpec.read(path)


@pytest.mark.parametrize(
    ("record", "data", "field", "fix"),
    [
        (
            SuiteSpec,
            {k: v for k, v in BANKING_SPEC.items() if k != "endpoint_sha256"},
            "endpoint_sha256",
            "suite stage",
        ),
        (UnsealEvent, {**EVENT, "kind": "sideways"}, "kind", "unseal stage"),
        (JudgeFile, {**JUDGE, "format": "other"}, "format", "apex_judge rule"),
        (ReplayReport, {**REPLAY, "extra": 1}, "extra", "replay rule"),
    ],
    ids=["spec-missing-field", "event-bad-kind", "judge-other-format", "replay-unknown-field"],
)
def test_a_bad_file_is_refused_naming_the_file_the_field_and_the_fix(tmp_path, record, data, field, fix):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordFileError) as err:
        record.read(path)
    assert str(path) in str(err.value) and f"field {field}" in str(err.value) and fix in str(err.value)


def test_a_missing_or_torn_file_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(RecordFileError, match="no SuiteSpec file there; rerun the suite stage"):
        SuiteSpec.read(tmp_path / "none.json")
    (tmp_path / "torn.json").write_text('{"suite": "ban')
    with pytest.raises(RecordFileError, match=r"torn\.json: not JSON"):
        SuiteSpec.read(tmp_path / "torn.json")


def test_an_early_replay_report_listing_its_mismatched_rollouts_reads_as_their_count(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({**REPLAY, "mismatched_rollouts": ["r1", "r2"]}))
    assert ReplayReport.read(tmp_path / "r.json").mismatched_rollouts == 2


def test_an_artifact_meta_is_written_as_before(tmp_path):
    from evoaudit.methods.artifact import read_meta, write_artifact

    write_artifact(tmp_path / "a", ArtifactMeta.model_validate(META), {"skill.md": "# skill\n"})
    assert (tmp_path / "a" / "meta.json").read_text() == json.dumps(META, indent=2, sort_keys=True) + "\n"
    assert read_meta(tmp_path / "a").inputs == {"acquisition": H}
    with pytest.raises(RecordFileError, match=r"b/meta\.json: no ArtifactMeta file there; rerun the evolve"):
        read_meta(tmp_path / "b")


def _instance(**fields) -> Instance:
    base = {
        "instance_id": "user_task_0.v0",
        "suite": "banking",
        "family": "user_task_0",
        "variant": "v0",
        "role": "endpoint",
        "split": "seen",
        "cluster": "c",
        "prompt": "p",
        "environment_template": "balance: 1\n",
        "ground_truth": [],
        "predicate": {"kind": "official"},
    }
    return Instance(**(base | fields))


def test_an_instance_says_what_its_environment_holds_and_agentdojo_records_keep_their_bytes():
    yaml_one = _instance()
    assert "environment_format" not in yaml_one.model_dump(mode="json")  # as written before the field
    assert Instance.model_validate(yaml_one.model_dump(mode="json")).environment_format == "agentdojo-yaml"
    assert yaml_one.environment("agentdojo-yaml") == "balance: 1\n"
    ref = _instance(environment_template='{"root": "r"}', environment_format="apex-world-ref")
    assert ref.model_dump(mode="json")["environment_format"] == "apex-world-ref"
    with pytest.raises(AuditError, match="user_task_0.v0: field environment_format is 'agentdojo-yaml'"):
        yaml_one.environment("apex-world-ref")
    with pytest.raises(ValueError, match="environment_format"):
        _instance(environment_format="xml")


def test_decisions_keep_exactly_the_keys_recorded():
    for recorded in ({"task_score": TASK, "attack_success": OPEN, "exposure": RULED}, {"task_score": TASK}):
        assert Decisions.model_validate(recorded).model_dump(mode="json") == recorded


def test_an_outcome_refuses_decisions_of_another_shape_and_banking_outcomes_carry_none():
    base = {"utility": True, "task_score": 1.0, "attack_success": None, "exposed": None}
    assert "decisions" not in Outcome(**base).model_dump() and Outcome(**base).decisions is None
    assert Outcome(**base, decisions={}).decisions is None  # an empty record of them reads as none
    recorded = {"task_score": TASK}
    typed = Outcome(**base, decisions=recorded)
    assert isinstance(typed.decisions, Decisions) and typed.decisions.task_score is not None
    assert typed.decisions.task_score.value == TASK["value"] and typed.decisions.attack_success is None
    assert typed.model_dump(mode="json")["decisions"] == recorded  # written back with the keys it had
    with pytest.raises(ValueError, match="decided_by"):
        Outcome(**base, decisions={"attack_success": {"value": True}})
    with pytest.raises(ValueError, match="Extra inputs"):
        Outcome(**base, decisions={"verdict": RULED})


def test_provenance_entries_read_back_with_each_stages_own_fields(tmp_path, cfg):
    out = tmp_path / "shard0.jsonl"
    write_provenance(out, cfg, "evaluate", defense={"name": "d", "origin": "o"})
    entry = read_provenance(tmp_path / "provenance.json")["shard0.jsonl"]
    assert (
        entry.schema_version == 1
        and entry.stage == "evaluate"
        and entry.defense == {"name": "d", "origin": "o"}
    )
    # An entry written before entries had a schema version reads as version 1.
    old = {k: v for k, v in provenance(cfg, stage="freeze").items() if k != "schema_version"}
    (tmp_path / "provenance.json").write_text(json.dumps({"manifest.json": old}))
    assert read_provenance(tmp_path / "provenance.json")["manifest.json"].schema_version == 1
    assert read_provenance(tmp_path / "none.json") == {}


def test_every_file_record_has_a_docstring_for_each_field():
    records = [
        SuiteSpec,
        UnsealEvent,
        LineageOpening,
        Manifest,
        JudgeFile,
        ReplayReport,
        RunManifest,
        AcquisitionRecord,
        ArtifactMeta,
        SupersededEntry,
        CheckerAuditSummary,
        Decisions,
    ]
    for record in records:
        missing = [n for n, f in record.model_fields.items() if not f.description]
        assert not missing, f"{record.__name__}: {missing}"
    assert all(issubclass(r, FileRecord) for r in records[:-1])
