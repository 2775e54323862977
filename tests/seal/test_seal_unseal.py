"""Freeze and unseal: manifests, read-only artifacts, one unseal event per root, forced or extended."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from evoaudit.records import Instance
from evoaudit.seal.freeze import combine_manifests, freeze_lineage, open_lineage, read_unseal_log, unseal
from evoaudit.seal.guard import assert_unsealed, load_instances, load_learning_instances
from evoaudit.seal.manifest import SealError, read_manifest, root_hash, verify_manifest
from evoaudit.suite.instances import write_instances


def _artifact(results: Path, lineage: str, method: str, text: str = "state") -> Path:
    d = results / "artifacts" / lineage / method
    d.mkdir(parents=True, exist_ok=True)
    meta = {"method": method, "lineage": lineage, "state_files": ["state.md"]}
    meta["inputs"] = {"acquisition": f"acq-{lineage}"}
    (d / "meta.json").write_text(json.dumps(meta) + "\n")
    (d / "state.md").write_text(f"{text} of {lineage}/{method}\n")
    return d


def _freeze_all(results: Path, lineages: dict[str, list[str]]) -> Path:
    paths = []
    for lineage, methods in lineages.items():
        dirs = [_artifact(results, lineage, m) for m in methods]
        path = results / "freeze" / lineage / "manifest.json"
        freeze_lineage(lineage, dirs, results, path)
        paths.append(path)
    out = results / "freeze" / "manifest.json"
    combine_manifests(paths, results, out)
    return out


def test_freeze_lists_every_file_sorted_with_a_root_and_makes_them_read_only(tmp_path):
    dirs = [_artifact(tmp_path, "L1", m) for m in ("static", "placebo-skillopt")]
    m = freeze_lineage("L1", dirs, tmp_path, tmp_path / "freeze/L1/manifest.json")
    paths = [e.path for e in m.entries]
    assert paths == sorted(paths) and len(paths) == 4
    assert "artifacts/L1/placebo-skillopt/state.md" in paths
    assert m.root == root_hash(m.entries) and m.lineage == "L1"
    for d in dirs:
        for f in d.iterdir():
            assert not f.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def test_freeze_refuses_a_method_that_has_not_evolved(tmp_path):
    (tmp_path / "artifacts/L1/skillopt").mkdir(parents=True)
    with pytest.raises(SealError, match="no meta.json.*evolve"):
        freeze_lineage("L1", [tmp_path / "artifacts/L1/skillopt"], tmp_path, tmp_path / "m.json")


def test_global_manifest_covers_every_lineage_and_keeps_each_lineage_root(tmp_path):
    out = _freeze_all(tmp_path, {"L1": ["static"], "L2": ["static"]})
    g = read_manifest(out)
    l1 = read_manifest(tmp_path / "freeze/L1/manifest.json")
    assert g.lineage is None and set(g.lineage_roots) == {"L1", "L2"}
    assert g.lineage_roots["L1"] == l1.root
    assert {e.path for e in l1.entries} < {e.path for e in g.entries}


def test_adding_a_lineage_leaves_existing_lineage_manifests_byte_identical(tmp_path):
    _freeze_all(tmp_path, {"L1": ["static"]})
    before = (tmp_path / "freeze/L1/manifest.json").read_bytes()
    root_before = read_manifest(tmp_path / "freeze/manifest.json").root
    dirs = [_artifact(tmp_path, "L1", "static")]
    for f in dirs[0].iterdir():
        f.chmod(0o644)  # the fixture rewrites the same bytes
    _freeze_all(tmp_path, {"L1": ["static"], "L2": ["static"]})
    assert (tmp_path / "freeze/L1/manifest.json").read_bytes() == before
    assert read_manifest(tmp_path / "freeze/manifest.json").root != root_before


def test_endpoint_variants_before_freeze_raise_naming_the_protocol_rule(tmp_path):
    with pytest.raises(SealError, match="endpoint blindness.*freeze"):
        load_instances(tmp_path / "never-read.parquet", ("v3",), ("v3", "v4", "v5"), manifest=None)


def _instances(tmp_path: Path) -> Path:
    rows = [
        Instance(
            instance_id=f"user_task_0.{v}",
            suite="banking",
            family="user_task_0",
            variant=v,
            role="endpoint" if v in ("v3", "v4") else "acquisition",
            split="seen",
            cluster="c0",
            prompt="p",
            environment_template="{}",
            ground_truth=[],
            predicate={"kind": "none"},
        )
        for v in ("v0", "v3", "v4")
    ]
    path = tmp_path / "instances.parquet"
    write_instances(rows, path)
    return path


def test_endpoint_variants_need_a_manifest_whose_every_file_verifies(tmp_path):
    table = _instances(tmp_path)
    manifest = read_manifest(_freeze_all(tmp_path, {"L1": ["static"]}))
    got = load_instances(table, ("v3",), ("v3", "v4"), manifest, tmp_path)
    assert [i.variant for i in got] == ["v3"]
    (tmp_path / "artifacts/L1/static/state.md").unlink()
    with pytest.raises(SealError, match="endpoint blindness.*state.md.*missing"):
        load_instances(table, ("v3",), ("v3", "v4"), manifest, tmp_path)
    assert {i.variant for i in load_learning_instances(table, ("v3", "v4"))} == {"v0"}


def test_unseal_twice_for_the_same_root_is_a_no_op(tmp_path):
    manifest = _freeze_all(tmp_path, {"L1": ["static"]})
    event_path = tmp_path / "freeze/unseal.json"
    first = unseal(manifest, tmp_path, event_path)
    first_bytes = event_path.read_bytes()
    event_path.unlink()  # Snakemake deletes a rule's outputs before rerunning it
    again = unseal(manifest, tmp_path, event_path)
    assert again == first and event_path.read_bytes() == first_bytes
    log = read_unseal_log(tmp_path / "freeze/unseal_log.jsonl")
    assert len(log) == 1 and log[0].kind == "first"
    assert set(first.code) == {"revision", "dirty"} and first.time


def _change_l1(results: Path) -> Path:
    f = results / "artifacts/L1/static/state.md"
    f.chmod(0o644)
    f.write_text("edited after unseal\n")
    return _freeze_all_again(results)


def _freeze_all_again(results: Path) -> Path:
    lineages = sorted(p.name for p in (results / "artifacts").iterdir())
    paths = []
    for lineage in lineages:
        dirs = sorted(p for p in (results / "artifacts" / lineage).iterdir())
        path = results / "freeze" / lineage / "manifest.json"
        freeze_lineage(lineage, dirs, results, path)
        paths.append(path)
    combine_manifests(paths, results, results / "freeze/manifest.json")
    return results / "freeze/manifest.json"


def test_unseal_for_a_different_root_refuses_unless_forced_and_records_the_force(tmp_path):
    manifest = _freeze_all(tmp_path, {"L1": ["static"]})
    event_path = tmp_path / "freeze/unseal.json"
    unseal(manifest, tmp_path, event_path)
    _change_l1(tmp_path)
    with pytest.raises(SealError, match="one unseal per freeze.*already unsealed.*force"):
        unseal(manifest, tmp_path, event_path, policy="extend")  # a changed lineage is no extension
    forced = unseal(manifest, tmp_path, event_path, force=True)
    log = read_unseal_log(tmp_path / "freeze/unseal_log.jsonl")
    assert [e.kind for e in log] == ["first", "forced"]
    assert forced.previous_root == log[0].manifest_root != forced.manifest_root


def test_extension_policy_accepts_only_added_lineages(tmp_path):
    manifest = _freeze_all(tmp_path, {"L1": ["static"]})
    event_path = tmp_path / "freeze/unseal.json"
    unseal(manifest, tmp_path, event_path)
    _artifact(tmp_path, "L2", "static")
    _freeze_all_again(tmp_path)
    with pytest.raises(SealError, match="extend"):
        unseal(manifest, tmp_path, event_path)  # default policy refuses
    event = unseal(manifest, tmp_path, event_path, policy="extend")
    assert event.kind == "extension" and set(event.lineage_roots) == {"L1", "L2"}


def test_global_scope_opens_a_lineage_only_against_an_event_covering_its_root(tmp_path):
    manifest = _freeze_all(tmp_path, {"L1": ["static"], "L2": ["static"]})
    lineage_manifest = tmp_path / "freeze/L1/manifest.json"
    opened_path = tmp_path / "freeze/L1/unseal.json"
    with pytest.raises(SealError, match="endpoint blindness.*does not exist"):
        open_lineage(lineage_manifest, tmp_path / "freeze/unseal.json", opened_path)
    unseal(manifest, tmp_path, tmp_path / "freeze/unseal.json")
    opened = open_lineage(lineage_manifest, tmp_path / "freeze/unseal.json", opened_path)
    assert assert_unsealed(opened_path, read_manifest(lineage_manifest)) == opened
    assert opened.manifest_root == read_manifest(lineage_manifest).root


def test_lineage_scope_unseals_each_lineage_on_its_own(tmp_path):
    _freeze_all(tmp_path, {"L1": ["static"]})
    l1 = tmp_path / "freeze/L1/manifest.json"
    event = unseal(l1, tmp_path, tmp_path / "freeze/L1/unseal.json", scope="lineage")
    assert event.key == "lineage:L1" and event.manifest_root == read_manifest(l1).root
    with pytest.raises(SealError, match="needs a lineage manifest"):
        unseal(tmp_path / "freeze/manifest.json", tmp_path, tmp_path / "x.json", scope="lineage")


def test_an_edited_manifest_does_not_verify(tmp_path):
    path = _freeze_all(tmp_path, {"L1": ["static"]})
    data = json.loads(path.read_text())
    data["entries"][0]["sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    with pytest.raises(SealError, match="root hash does not match"):
        verify_manifest(read_manifest(path), tmp_path)


def test_extension_policy_accepts_a_new_method_in_an_existing_lineage(tmp_path):
    manifest = _freeze_all(tmp_path, {"L1": ["static"]})
    unseal(manifest, tmp_path, tmp_path / "freeze/unseal.json")
    _artifact(tmp_path, "L1", "placebo-awm")
    _freeze_all_again(tmp_path)
    event = unseal(manifest, tmp_path, tmp_path / "freeze/unseal.json", policy="extend")
    assert event.kind == "extension" and "artifacts/L1/placebo-awm/state.md" in event.files
