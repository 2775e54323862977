"""The seal has one door: the endpoint file, roles, manifests and the APEX attack set are checked on every
path that reads them."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest
from conftest import write_suite_spec
from seal_kit import ENDPOINT, instance

from evoaudit import cli
from evoaudit import config as config_mod
from evoaudit.ops.sim_oracle import TableOracleSource
from evoaudit.seal.freeze import combine_manifests, freeze_lineage, unseal
from evoaudit.seal.guard import load_instances, load_learning_instances
from evoaudit.seal.manifest import SealError, root_hash, write_json_atomic
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.environment import attack_set
from evoaudit.suite.instances import SealedTableError, read_instance_table, write_instances
from evoaudit.suite.stage import endpoint_table_path

SRC = Path(__file__).resolve().parents[2] / "src" / "evoaudit"


def _sealed_tables(tmp_path: Path) -> tuple[Path, Path, Path]:
    table = tmp_path / "suite" / "instances.parquet"
    spec = tmp_path / "suite" / "suite_spec.json"
    write_suite_spec(spec, [instance(v) for v in ("v0", "v1", "v3", "v4", "v5")], ENDPOINT, table)
    return table, endpoint_table_path(table), spec


V5_ONLY = {"roles": {"benign_endpoint": ["v5"], "attacked_endpoint": ["v5"]}}


# --- the endpoint file ------------------------------------------------------------------------------------


def test_the_endpoint_file_is_refused_by_the_unsealed_reader(tmp_path):
    _, endpoint, _ = _sealed_tables(tmp_path)
    with pytest.raises(SealedTableError, match="endpoint blindness.*sealed endpoint file"):
        read_instance_table(endpoint)


def test_replay_cli_refuses_the_endpoint_file_without_manifest_and_event(tmp_path, capsys):
    _, endpoint, _ = _sealed_tables(tmp_path)
    (tmp_path / "config.yaml").write_text("{}\n")
    rollouts = tmp_path / "shard0.jsonl"
    rollouts.write_text("")
    argv = ["replay", "--config", str(tmp_path / "config.yaml"), "--rollouts", str(rollouts)]
    rc = cli.main([*argv, "--table", str(endpoint), "--out", str(tmp_path / "replay.json")])
    assert rc == 1
    assert "endpoint blindness" in capsys.readouterr().err
    assert not (tmp_path / "replay.json").exists()


def test_replay_cli_needs_every_seal_option_together(tmp_path, capsys):
    _, endpoint, spec = _sealed_tables(tmp_path)
    (tmp_path / "config.yaml").write_text("{}\n")
    argv = ["replay", "--config", str(tmp_path / "config.yaml"), "--rollouts", "r.jsonl", "--out", "o.json"]
    assert cli.main([*argv, "--table", str(endpoint), "--spec", str(spec)]) == 1
    assert "--manifest, --event needed" in capsys.readouterr().err


def test_evolving_from_the_endpoint_file_is_refused(tmp_path):
    _, endpoint, _ = _sealed_tables(tmp_path)
    with pytest.raises(SealedTableError, match="endpoint blindness"):
        load_learning_instances(endpoint, ENDPOINT)


def test_only_the_guard_calls_the_sealed_reader():
    callers = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)
            if name == "read_endpoint_table":
                callers.add(path.relative_to(SRC).as_posix())
    assert callers == {"seal/guard.py", "suite/instances.py"}


# --- roles ------------------------------------------------------------------------------------------------


def test_a_roles_override_that_drops_sealed_variants_is_refused_naming_roles_and_the_variants(tmp_path):
    table, _, spec = _sealed_tables(tmp_path)
    cfg = config_mod.from_dict(V5_ONLY)
    with pytest.raises(
        SealError, match=r"endpoint blindness.*roles: variant\(s\) \['v3', 'v4'\] are endpoint"
    ):
        load_learning_instances(table, cfg.roles.endpoint_variants)  # the spec beside the table
    with pytest.raises(SealError, match=r"roles: variant\(s\) \['v3', 'v4'\]"):
        load_learning_instances(tmp_path / "elsewhere.parquet", cfg.roles.endpoint_variants, spec)
    assert {i.variant for i in load_learning_instances(table, ENDPOINT)} == {"v0", "v1"}


def test_serve_sim_refuses_a_roles_override_that_would_unseal_endpoint_variants(tmp_path):
    table, _, _ = _sealed_tables(tmp_path)
    source = TableOracleSource(config_mod.from_dict(V5_ONLY), table, None, tmp_path)
    with pytest.raises(SealError, match=r"roles: variant\(s\) \['v3', 'v4'\]"):
        source.load()


def test_a_recorded_endpoint_role_stays_sealed_whatever_the_roles_say(tmp_path):
    table = tmp_path / "all.parquet"  # an unsealed table with every variant and no spec beside it
    write_instances([instance(v) for v in ("v0", "v3", "v4", "v5")], table)
    assert {i.variant for i in load_learning_instances(table, ("v5",))} == {"v0"}
    with pytest.raises(SealError, match=r"records variants \['v3'\] as endpoint variants"):
        load_instances(table, ("v3",), ("v5",))


# --- manifests --------------------------------------------------------------------------------------------


def _artifact(results: Path, lineage: str, method: str) -> Path:
    d = results / "artifacts" / lineage / method
    d.mkdir(parents=True, exist_ok=True)
    meta = {"method": method, "lineage": lineage, "state_files": ["state.md"]}
    meta["inputs"] = {"acquisition": f"acq-{lineage}"}
    (d / "meta.json").write_text(json.dumps(meta) + "\n")
    (d / "state.md").write_text(f"state of {lineage}/{method}\n")
    return d


def _freeze(results: Path, lineages: dict[str, list[str]]) -> Path:
    paths = []
    for lineage, methods in lineages.items():
        dirs = [results / "artifacts" / lineage / m for m in methods]
        for m in methods:
            if not (results / "artifacts" / lineage / m / "meta.json").exists():
                _artifact(results, lineage, m)
        path = results / "freeze" / lineage / "manifest.json"
        for f in (f for d in dirs for f in d.iterdir()):
            f.chmod(0o644)  # freeze makes them read-only; the fixture freezes again
        freeze_lineage(lineage, dirs, results, path)
        paths.append(path)
    out = results / "freeze" / "manifest.json"
    combine_manifests(paths, results, out)
    return out


def test_a_hand_edited_manifest_listing_only_meta_json_is_refused(tmp_path):
    out = _freeze(tmp_path, {"L1": ["static", "skillopt"]})
    doc = json.loads(out.read_text())
    doc["entries"] = [e for e in doc["entries"] if e["path"].endswith("/meta.json")]
    from evoaudit.records import ManifestEntry

    doc["root"] = root_hash([ManifestEntry(**e) for e in doc["entries"]])
    write_json_atomic(out, doc)
    with pytest.raises(
        SealError, match=r"tamper evidence.*not the manifest rebuilt.*2 file\(s\).*not listed"
    ):
        unseal(out, tmp_path, tmp_path / "freeze/unseal.json")
    assert not (tmp_path / "freeze/unseal_log.jsonl").exists()


def test_a_hand_edited_lineage_manifest_is_refused(tmp_path):
    out = _freeze(tmp_path, {"L1": ["static"]})
    lineage = tmp_path / "freeze/L1/manifest.json"
    doc = json.loads(lineage.read_text())
    doc["entries"] = [e for e in doc["entries"] if e["path"].endswith("/meta.json")]
    write_json_atomic(lineage, doc)
    with pytest.raises(SealError, match=r"tamper evidence.*lineage L1"):
        unseal(out, tmp_path, tmp_path / "freeze/unseal.json")


def test_extend_accepts_a_new_lineage(tmp_path):
    unseal(_freeze(tmp_path, {"L1": ["static"]}), tmp_path, tmp_path / "freeze/unseal.json")
    out = _freeze(tmp_path, {"L1": ["static"], "L2": ["static"]})
    assert unseal(out, tmp_path, tmp_path / "freeze/unseal.json", policy="extend").kind == "extension"


def test_extend_refuses_a_file_added_to_an_artifact_unsealed_before(tmp_path):
    unseal(_freeze(tmp_path, {"L1": ["static"]}), tmp_path, tmp_path / "freeze/unseal.json")
    (tmp_path / "artifacts/L1/static/extra.md").write_text("added after unseal\n")
    out = _freeze(tmp_path, {"L1": ["static"]})
    with pytest.raises(
        SealError, match=r"one unseal per freeze.*added to artifacts/L1/static, which was unsealed"
    ):
        unseal(out, tmp_path, tmp_path / "freeze/unseal.json", policy="extend")


def test_extend_refuses_an_artifact_an_evaluation_record_already_used(tmp_path):
    unseal(_freeze(tmp_path, {"L1": ["skillopt"]}), tmp_path, tmp_path / "freeze/unseal.json")
    shard = tmp_path / "evaluate/L1/static/benign/shard0.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text(json.dumps({"rollout_id": "L1/static/benign/x", "artifact_sha256": "ab"}) + "\n")
    out = _freeze(tmp_path, {"L1": ["skillopt", "static"]})
    with pytest.raises(SealError, match=r"artifacts/L1/static, which the evaluation record .*shard0.jsonl"):
        unseal(out, tmp_path, tmp_path / "freeze/unseal.json", policy="extend")


# --- the APEX attack set ----------------------------------------------------------------------------------


def _attack_file(tmp_path: Path) -> Path:
    path = tmp_path / "attacks.json"
    data = json.dumps({"format": attack_sets.FORMAT_VERSION, "instances": []}).encode()
    path.write_bytes(data)
    attack_sets.pin_path(path).write_text(hashlib.sha256(data).hexdigest() + "\n")  # as a build pins it
    return path


def test_a_tampered_attack_set_is_refused_against_its_pin(tmp_path):
    path = _attack_file(tmp_path)
    assert attack_sets.load_attack_set(path) == []
    path.write_bytes(path.read_bytes().replace(b"[]", b"[ ]"))
    with pytest.raises(attack_sets.AttackSetTampered, match="frozen attack set.*not the one pinned"):
        attack_sets.load_attack_set(path)
    with pytest.raises(attack_sets.AttackSetTampered, match="frozen attack set"):
        attack_set(path)  # what an episode resolves its attack through


def test_an_attack_set_is_refused_against_the_sha256_its_instances_recorded(tmp_path):
    path = _attack_file(tmp_path)
    with pytest.raises(attack_sets.AttackSetTampered, match="not the one the suite spec froze"):
        attack_set(path, "0" * 64)


def test_an_attack_set_without_its_pin_is_refused(tmp_path):
    path = _attack_file(tmp_path)
    attack_sets.pin_path(path).unlink()
    with pytest.raises(attack_sets.AttackSetTampered, match="no readable pinned sha256"):
        attack_sets.load_attack_set(path)


# --- content, not labels ----------------------------------------------------------------------------------


def _strip_metadata(source: Path, dest: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(source).replace_schema_metadata(None)
    pq.write_table(table, dest)


def test_the_endpoint_file_with_its_metadata_stripped_is_refused_in_place_of_the_instance_table(tmp_path):
    table, endpoint, spec = _sealed_tables(tmp_path)
    _strip_metadata(endpoint, table)  # the mark is gone: read_instance_table alone would accept it
    assert {i.variant for i in read_instance_table(table)} == {"v3", "v4", "v5"}
    with pytest.raises(SealError, match=r"endpoint blindness.*committed the instance table"):
        load_learning_instances(table, ENDPOINT)  # the spec beside the table
    elsewhere = tmp_path / "copy.parquet"
    _strip_metadata(endpoint, elsewhere)
    with pytest.raises(SealError, match="only the suite's own instance table"):
        load_learning_instances(elsewhere, ENDPOINT, spec)


def test_evolution_needs_the_suite_spec_beside_its_table(tmp_path):
    from evoaudit.hashing import sha256_file
    from evoaudit.methods.evolve import evolve
    from evoaudit.records import AcquisitionRecord, RecordFileError

    table = tmp_path / "loose" / "instances.parquet"  # a table no suite stage committed
    table.parent.mkdir()
    write_instances([instance(v) for v in ("v0", "v1")], table)
    rollouts, record = tmp_path / "rollouts.jsonl", tmp_path / "record.json"
    rollouts.write_text("")
    AcquisitionRecord(
        lineage="L1", path=str(rollouts), sha256=sha256_file(rollouts), rollouts=0, successes=0,
        infra_failures=0, executor={},
    ).write(record)  # fmt: skip
    with pytest.raises((SealError, RecordFileError), match="suite_spec.json"):
        evolve(config_mod.from_dict({}), "L1", "skillopt", rollouts, record, tmp_path / "out", table)
    assert not (tmp_path / "out" / "meta.json").exists()


def _recorded(results: Path, method: str, **inputs: str) -> Path:
    d = _artifact(results, "L1", method)
    meta = json.loads((d / "meta.json").read_text())
    meta["inputs"] = inputs
    (d / "meta.json").write_text(json.dumps(meta) + "\n")
    return d


def _acquisition(results: Path, sha: str) -> None:
    from evoaudit.records import AcquisitionRecord

    path = results / "acquire" / "L1" / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    AcquisitionRecord(
        lineage="L1", path="rollouts.jsonl", sha256=sha, rollouts=0, successes=0, infra_failures=0,
        executor={},
    ).write(path)  # fmt: skip


def test_freeze_refuses_an_artifact_learned_from_another_instance_table(tmp_path):
    _, _, spec = _sealed_tables(tmp_path)
    committed = json.loads(spec.read_text())["instances_sha256"]
    _acquisition(tmp_path, "a" * 64)
    good = _recorded(tmp_path, "awm", acquisition="a" * 64, instances=committed)
    bad = _recorded(tmp_path, "skillopt", acquisition="a" * 64, instances="b" * 64)
    with pytest.raises(SealError, match=r"skillopt/meta.json records instance table sha256 b{64}"):
        freeze_lineage("L1", [good, bad], tmp_path, tmp_path / "freeze" / "L1" / "manifest.json")
    freeze_lineage("L1", [good], tmp_path, tmp_path / "freeze" / "L1" / "manifest.json")


def test_freeze_refuses_artifacts_that_agree_on_an_acquisition_the_lineage_did_not_record(tmp_path):
    _, _, spec = _sealed_tables(tmp_path)
    committed = json.loads(spec.read_text())["instances_sha256"]
    _acquisition(tmp_path, "a" * 64)
    dirs = [_recorded(tmp_path, m, acquisition="c" * 64, instances=committed) for m in ("awm", "skillopt")]
    with pytest.raises(SealError, match=r"matched acquisition.*records acquisition sha256 c{64}"):
        freeze_lineage("L1", dirs, tmp_path, tmp_path / "freeze" / "L1" / "manifest.json")


def test_unseal_refuses_a_manifest_whose_artifacts_no_longer_match_the_suite_spec(tmp_path):
    _, _, spec = _sealed_tables(tmp_path)
    committed = json.loads(spec.read_text())["instances_sha256"]
    _acquisition(tmp_path, "a" * 64)
    d = _recorded(tmp_path, "awm", acquisition="a" * 64, instances=committed)
    lineage_manifest = tmp_path / "freeze" / "L1" / "manifest.json"
    freeze_lineage("L1", [d], tmp_path, lineage_manifest)
    # The suite stage ran again (another table) after the freeze: the frozen artifact is now foreign.
    data = json.loads(spec.read_text())
    data["instances_sha256"] = "d" * 64
    spec.write_text(json.dumps(data))
    with pytest.raises(SealError, match="records instance table sha256"):
        unseal(lineage_manifest, tmp_path, tmp_path / "freeze" / "L1" / "unseal.json", scope="lineage")


def test_an_evaluated_artifact_is_found_by_its_methods_name_even_with_a_hyphen(tmp_path):
    from evoaudit.seal.freeze import evaluated_artifacts

    for condition in ("dc-cu", "awm-adapted", "placebo-dc-rs"):
        shard = tmp_path / "evaluate" / "L1" / condition / "benign" / "shard0.jsonl"
        shard.parent.mkdir(parents=True)
        shard.write_text("{}\n")
    dirs = {"artifacts/L1/dc-cu", "artifacts/L1/awm", "artifacts/L1/placebo-dc-rs", "artifacts/L1/dc-rs"}
    found = evaluated_artifacts(tmp_path, dirs)
    assert sorted(found) == ["artifacts/L1/awm", "artifacts/L1/dc-cu", "artifacts/L1/placebo-dc-rs"]
