"""The physical seal: endpoint variants in their own committed file, complete freezes, no silent redo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_suite_spec
from seal_kit import ENDPOINT, instance

from evoaudit import config as config_mod
from evoaudit.hashing import sha256_file
from evoaudit.methods.evolve import evolve
from evoaudit.records import AcquisitionRecord
from evoaudit.seal.freeze import freeze_lineage, read_unseal_log
from evoaudit.seal.guard import load_endpoint_instances
from evoaudit.seal.manifest import SealError, read_manifest
from evoaudit.seal.redo import superseded_log
from evoaudit.seal.stage import freeze_stage, redo_stage, unseal_stage
from evoaudit.suite.instances import read_endpoint_table, read_instance_table
from evoaudit.suite.stage import endpoint_table_path, write_sealed_tables


def _acquisition(results: Path, lineage: str, text: str = "") -> tuple[Path, Path]:
    d = results / "acquire" / lineage
    d.mkdir(parents=True, exist_ok=True)
    rollouts, record = d / "rollouts.jsonl", d / "record.json"
    rollouts.write_text(text)
    AcquisitionRecord(
        lineage=lineage,
        path=rollouts.as_posix(),
        sha256=sha256_file(rollouts),
        rollouts=0,
        successes=0,
        infra_failures=0,
        executor={},
    ).write(record)
    return rollouts, record


def _cfg(**overrides) -> config_mod.Config:
    base = {"lineages": ["L1", "L2"], "methods": ["static"], "conditions": ["static"]}
    return config_mod.from_dict(base | overrides)


def _evolve_and_freeze(results: Path, cfg: config_mod.Config, lineages: list[str]) -> list[Path]:
    manifests = []
    for lineage in lineages:
        rollouts, record = _acquisition(results, lineage)
        artifact = results / "artifacts" / lineage / "static"
        evolve(cfg, lineage, "static", rollouts, record, artifact)
        path = results / "freeze" / lineage / "manifest.json"
        freeze_stage(cfg, [artifact], results, path, lineage=lineage)
        manifests.append(path)
    return manifests


def _sealed_tables(tmp_path: Path) -> tuple[Path, Path, Path]:
    table = tmp_path / "suite" / "instances.parquet"
    spec = tmp_path / "suite" / "suite_spec.json"
    write_suite_spec(spec, [instance(v) for v in ("v0", "v1", "v3", "v4")], ENDPOINT, table)
    return table, endpoint_table_path(table), spec


def test_learning_table_holds_no_endpoint_variant_and_the_spec_commits_the_endpoint_file(tmp_path):
    table, endpoint, spec = _sealed_tables(tmp_path)
    assert {i.variant for i in read_instance_table(table)} == {"v0", "v1"}
    assert {i.variant for i in read_endpoint_table(endpoint)} == {"v3", "v4"}
    committed = json.loads(spec.read_text())
    assert committed["endpoint_sha256"] == sha256_file(endpoint)
    assert committed["instances_sha256"] == sha256_file(table) != committed["endpoint_sha256"]


def test_endpoint_instances_need_the_committed_hash_and_an_unseal_event_for_the_manifest(tmp_path):
    cfg = _cfg(lineages=["L1"], seal={"seal_scope": "lineage"})
    _, endpoint, spec = _sealed_tables(tmp_path)
    (manifest_path,) = _evolve_and_freeze(tmp_path, cfg, ["L1"])
    manifest = read_manifest(manifest_path)
    event = tmp_path / "freeze" / "L1" / "unseal.json"
    with pytest.raises(SealError, match="endpoint blindness.*no unseal event"):
        load_endpoint_instances(endpoint, spec, manifest, event, tmp_path)
    unseal_stage(cfg, manifest_path, tmp_path, event, lineage="L1")
    got = load_endpoint_instances(endpoint, spec, manifest, event, tmp_path, ("v3",))
    assert [i.variant for i in got] == ["v3"]

    # An endpoint file other than the one the suite stage committed stays sealed.
    write_sealed_tables([instance(v) for v in ("v0", "v3")], ENDPOINT, tmp_path / "other.parquet")
    endpoint.write_bytes(endpoint_table_path(tmp_path / "other.parquet").read_bytes())
    with pytest.raises(SealError, match="endpoint blindness.*endpoint.parquet has sha256.*committed"):
        load_endpoint_instances(endpoint, spec, manifest, event, tmp_path)


def test_global_unseal_of_a_partial_freeze_refuses_naming_every_missing_artifact(tmp_path):
    cfg = _cfg(methods=["static"], conditions=["static"])
    l1, _ = _evolve_and_freeze(tmp_path, cfg, ["L1", "L2"])
    partial = tmp_path / "freeze" / "manifest.json"
    freeze_stage(cfg, [l1], tmp_path, partial, combine=True)  # L1 only: L2 is not in the global root
    with pytest.raises(SealError, match=r"does not cover 1 configured artifact.*: artifacts/L2/static\."):
        unseal_stage(cfg, partial, tmp_path, tmp_path / "freeze" / "unseal.json")
    assert not (tmp_path / "freeze" / "unseal_log.jsonl").exists()

    complete = [tmp_path / "freeze" / ln / "manifest.json" for ln in ("L1", "L2")]
    freeze_stage(cfg, complete, tmp_path, partial, combine=True)
    assert unseal_stage(cfg, partial, tmp_path, tmp_path / "freeze" / "unseal.json").kind == "first"


def test_lineage_scope_unseal_needs_every_method_and_placebo_of_that_lineage(tmp_path):
    cfg = _cfg(
        lineages=["L1"],
        methods=["static", "skillopt"],
        conditions=["static", "skillopt", "placebo-skillopt"],
        seal={"seal_scope": "lineage"},
    )
    (manifest,) = _evolve_and_freeze(tmp_path, cfg, ["L1"])  # static only
    with pytest.raises(SealError, match="lineage L1: artifacts/L1/skillopt, artifacts/L1/placebo-skillopt"):
        unseal_stage(cfg, manifest, tmp_path, tmp_path / "freeze/L1/unseal.json", lineage="L1")


def test_freeze_refuses_artifacts_of_one_lineage_evolved_from_different_acquisitions(tmp_path):
    cfg = _cfg(lineages=["L1"])
    rollouts, record = _acquisition(tmp_path, "L1", "")
    evolve(cfg, "L1", "static", rollouts, record, tmp_path / "artifacts/L1/static")
    rollouts, record = _acquisition(tmp_path, "L1", '{"another": "record"}\n')  # re-acquired since
    evolve(cfg, "L1", "static", rollouts, record, tmp_path / "artifacts/L1/static-again")
    dirs = [tmp_path / "artifacts/L1/static", tmp_path / "artifacts/L1/static-again"]
    with pytest.raises(SealError, match="matched acquisition.*L1 evolved from 2 different"):
        freeze_lineage("L1", dirs, tmp_path, tmp_path / "freeze/L1/manifest.json")


def test_reevolving_an_unsealed_artifact_is_refused_and_leaves_it_in_place(tmp_path):
    cfg = _cfg(lineages=["L1"], seal={"seal_scope": "lineage"})
    (manifest,) = _evolve_and_freeze(tmp_path, cfg, ["L1"])
    unseal_stage(cfg, manifest, tmp_path, tmp_path / "freeze/L1/unseal.json", lineage="L1")
    artifact = tmp_path / "artifacts/L1/static"
    before = (artifact / "meta.json").read_bytes()
    rollouts, record = _acquisition(tmp_path, "L1")
    refused = "one unseal per freeze.*evoaudit redo --lineage L1 --artifact static"
    with pytest.raises(SealError, match=refused):
        evolve(cfg, "L1", "static", rollouts, record, artifact)
    assert (artifact / "meta.json").read_bytes() == before


def test_redo_archives_the_artifact_logs_it_and_the_next_unseal_is_recorded_as_a_redo(tmp_path):
    cfg = _cfg(lineages=["L1"], seal={"seal_scope": "lineage"})
    (manifest,) = _evolve_and_freeze(tmp_path, cfg, ["L1"])
    event = tmp_path / "freeze/L1/unseal.json"
    first = unseal_stage(cfg, manifest, tmp_path, event, lineage="L1")
    artifact = tmp_path / "artifacts/L1/static"
    old_meta = sha256_file(artifact / "meta.json")
    with pytest.raises(SealError, match="--reason is required"):
        redo_stage(cfg, tmp_path, "L1", "static", " ")

    (entry,) = redo_stage(cfg, tmp_path, "L1", "static", "acquisition record was truncated")
    archived = tmp_path / entry.archived_to
    assert archived.parent.parent.parent.name == "superseded" and not artifact.exists()
    assert sha256_file(archived / "meta.json") == old_meta == entry.files["meta.json"]
    assert superseded_log(tmp_path) == [entry] and entry.unsealed_root == first.manifest_root

    rollouts, record = _acquisition(tmp_path, "L1", '{"redone": 1}\n')
    evolve(cfg, "L1", "static", rollouts, record, artifact)  # allowed again: nothing covered is replaced
    freeze_stage(cfg, [artifact], tmp_path, manifest, lineage="L1")
    again = unseal_stage(cfg, manifest, tmp_path, event, lineage="L1")
    assert again.kind == "redo" and again.previous_root == first.manifest_root
    assert [e.kind for e in read_unseal_log(tmp_path / "freeze/unseal_log.jsonl")] == ["first", "redo"]


def test_a_changed_artifact_without_a_redo_still_cannot_unseal(tmp_path):
    cfg = _cfg(lineages=["L1"], seal={"seal_scope": "lineage"})
    (manifest,) = _evolve_and_freeze(tmp_path, cfg, ["L1"])
    event = tmp_path / "freeze/L1/unseal.json"
    unseal_stage(cfg, manifest, tmp_path, event, lineage="L1")
    meta = tmp_path / "artifacts/L1/static/meta.json"
    meta.chmod(0o644)
    meta.write_text(meta.read_text().replace("identity", "edited"))
    freeze_stage(cfg, [meta.parent], tmp_path, manifest, lineage="L1")
    with pytest.raises(SealError, match="one unseal per freeze"):
        unseal_stage(cfg, manifest, tmp_path, event, lineage="L1")


def test_redo_of_a_method_archives_its_unsealed_placebo_too(tmp_path):
    cfg = _cfg(
        lineages=["L1"],
        methods=["static", "skillopt"],
        conditions=["static", "skillopt", "placebo-skillopt"],
        seal={"seal_scope": "lineage"},
    )
    dirs = []
    for name in ("static", "skillopt", "placebo-skillopt"):
        d = tmp_path / "artifacts" / "L1" / name
        d.mkdir(parents=True)
        meta = {"method": name, "lineage": "L1", "state_files": [], "inputs": {"acquisition": "a" * 64}}
        (d / "meta.json").write_text(json.dumps(meta))
        dirs.append(d)
    manifest = tmp_path / "freeze/L1/manifest.json"
    freeze_stage(cfg, dirs, tmp_path, manifest, lineage="L1")
    unseal_stage(cfg, manifest, tmp_path, tmp_path / "freeze/L1/unseal.json", lineage="L1")
    entries = redo_stage(cfg, tmp_path, "L1", "skillopt", "new optimizer")
    assert [e.artifact for e in entries] == ["artifacts/L1/skillopt", "artifacts/L1/placebo-skillopt"]
    assert (tmp_path / "artifacts/L1/static").exists()
