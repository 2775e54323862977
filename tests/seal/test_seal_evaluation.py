"""The seal as evaluation sees it: matched acquisition, tamper evidence, and the determinism check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.evaluate.stage import evaluate_shard
from evoaudit.evaluate.verify import DeterminismError, comparable, verify_rollouts
from evoaudit.hashing import sha256_file
from evoaudit.methods.evolve import AcquisitionMismatch, evolve
from evoaudit.records import AcquisitionRecord, UnsealEvent
from evoaudit.seal.freeze import combine_manifests, freeze_lineage, open_lineage, unseal
from evoaudit.seal.manifest import SealError
from evoaudit.suite.agentdojo.banking.instances import build_instances


def _acquisition(results: Path, lineage: str, text: str) -> tuple[Path, Path]:
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


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    """One lineage evolved (static), frozen, globally unsealed and evaluated on one benign shard."""
    results = tmp_path_factory.mktemp("results")
    cfg = config_mod.from_dict({"lineages": ["L1"], "evaluation": {"shards": 4}})
    table = results / "suite" / "instances.parquet"
    table.parent.mkdir(parents=True)
    spec = results / "suite" / "suite_spec.json"
    write_suite_spec(spec, build_instances(cfg), cfg.roles.endpoint_variants, table)
    rollouts, record = _acquisition(results, "L1", "")
    artifact = results / "artifacts" / "L1" / "static"
    evolve(cfg, "L1", "static", rollouts, record, artifact)
    lineage_manifest = results / "freeze" / "L1" / "manifest.json"
    freeze_lineage("L1", [artifact], results, lineage_manifest)
    combine_manifests([lineage_manifest], results, results / "freeze" / "manifest.json")
    unseal(results / "freeze" / "manifest.json", results, results / "freeze" / "unseal.json")
    open_lineage(
        lineage_manifest, results / "freeze" / "unseal.json", results / "freeze" / "L1" / "unseal.json"
    )
    shard = results / "evaluate" / "L1" / "static" / "benign" / "shard0.jsonl"
    kwargs = dict(
        table=table,
        spec=spec,
        manifest_path=lineage_manifest,
        unseal_event=results / "freeze" / "L1" / "unseal.json",
        artifact_dir=artifact,
        results_dir=results,
    )
    evaluate_shard(cfg, "L1", "static", "benign", 0, out=shard, **kwargs)
    return cfg, results, shard, kwargs


def test_evolve_given_a_different_acquisition_record_refuses(tmp_path, cfg):
    rollouts, record = _acquisition(tmp_path, "L1", '{"rollout": 1}\n')
    rollouts.write_text('{"rollout": 2}\n')  # another record than the one acquisition hashed
    with pytest.raises(AcquisitionMismatch, match="matched acquisition.*rollouts.jsonl"):
        evolve(cfg, "L1", "static", rollouts, record, tmp_path / "artifact")
    assert not (tmp_path / "artifact").exists()


def test_evaluation_writes_records_and_provenance_with_the_manifest_root(sealed):
    _, results, shard, _ = sealed
    assert len(shard.read_text().splitlines()) > 0
    prov = json.loads((shard.parent / "provenance.json").read_text())["shard0.jsonl"]
    root = json.loads((results / "freeze" / "L1" / "manifest.json").read_text())["root"]
    assert prov["manifest_root"] == root and prov["stage"] == "evaluate"
    assert prov["executor"]["backend"] == "sim" and prov["suite_spec_sha256"]


def test_one_edited_artifact_byte_makes_evaluation_refuse_naming_path_and_both_hashes(sealed, tmp_path):
    cfg, results, _, kwargs = sealed
    meta = results / "artifacts" / "L1" / "static" / "meta.json"
    original = meta.read_bytes()
    expected = sha256_file(meta)
    meta.chmod(0o644)
    try:
        meta.write_bytes(original.replace(b"identity", b"identitY", 1))
        actual = sha256_file(meta)
        with pytest.raises(SealError, match="tamper evidence") as err:
            evaluate_shard(cfg, "L1", "static", "benign", 1, out=tmp_path / "shard1.jsonl", **kwargs)
        assert str(meta) in str(err.value) and actual in str(err.value) and expected in str(err.value)
        assert not (tmp_path / "shard1.jsonl").exists()
    finally:
        meta.write_bytes(original)
        meta.chmod(0o444)


def test_evaluation_refuses_an_unseal_event_for_another_root(sealed, tmp_path):
    cfg, results, _, kwargs = sealed
    event = tmp_path / "unseal.json"
    recorded = UnsealEvent.read(results / "freeze" / "unseal.json")
    recorded.model_copy(update={"manifest_root": "0" * 64}).write(event)
    with pytest.raises(SealError, match="unseal"):
        evaluate_shard(
            cfg, "L1", "static", "benign", 1, out=tmp_path / "s.jsonl", **(kwargs | {"unseal_event": event})
        )


def test_evaluation_without_an_unseal_event_refuses_naming_the_stage_to_run(sealed, tmp_path):
    cfg, _, _, kwargs = sealed
    missing = tmp_path / "no-unseal.json"
    with pytest.raises(SealError, match=f"no unseal event at {missing}; run the unseal stage first"):
        evaluate_shard(
            cfg, "L1", "static", "benign", 1, out=tmp_path / "s.jsonl", **(kwargs | {"unseal_event": missing})
        )
    assert not (tmp_path / "s.jsonl").exists()


def test_determinism_check_reruns_a_sample_and_finds_it_byte_identical(sealed, tmp_path):
    cfg, results, shard, kwargs = sealed
    report = verify_rollouts(
        cfg,
        [shard],
        table=kwargs["table"],
        spec=kwargs["spec"],
        results_dir=results,
        out=tmp_path / "v.json",
        sample=3,
    )
    assert report["sampled"] == 3 and report["verified"] == 3 and report["differing"] == 0


def test_determinism_check_ignores_timing_but_catches_any_other_changed_byte(sealed, tmp_path):
    cfg, results, shard, kwargs = sealed
    original = shard.read_text()
    lines = original.splitlines(keepends=True)
    every = len(lines)
    try:
        timed = [json.dumps(json.loads(line) | {"wall_s": 123.0}) + "\n" for line in lines]
        shard.write_text("".join(timed))
        ok = verify_rollouts(
            cfg,
            [shard],
            table=kwargs["table"],
            spec=kwargs["spec"],
            results_dir=results,
            out=tmp_path / "a.json",
            sample=every,
        )
        assert ok["verified"] == every
        changed = [json.loads(line) for line in lines]
        changed[0]["final_output"] += " "
        shard.write_text("".join(json.dumps(r) + "\n" for r in changed))
        with pytest.raises(DeterminismError, match="1 of"):
            verify_rollouts(
                cfg,
                [shard],
                table=kwargs["table"],
                spec=kwargs["spec"],
                results_dir=results,
                out=tmp_path / "b.json",
                sample=every,
            )
        detail = json.loads((tmp_path / "b.json").read_text())["details"][0]
        assert detail["rollout_id"] == changed[0]["rollout_id"] and detail["fields"] == ["final_output"]
    finally:
        shard.write_text(original)


def test_comparison_ignores_timing_and_answer_source_only():
    base = {"id": "r", "wall_s": 1.0, "executor": {"model": "m", "source": "live"}, "usage": {"requests": 3}}
    same = base | {"wall_s": 9.0, "executor": {"model": "m", "source": "cache"}, "usage": {"requests": 0}}
    assert comparable(json.dumps(base)) == comparable(json.dumps(same))
    other_model = base | {"executor": {"model": "other", "source": "live"}}
    nested_source = base | {"messages": [{"source": 1}]}
    for changed in (other_model, nested_source):
        assert comparable(json.dumps(base)) != comparable(json.dumps(changed))


def test_determinism_check_samples_defended_shards_too_and_catches_a_changed_defended_byte(sealed, tmp_path):
    _, results, shard, kwargs = sealed
    raw = {"lineages": ["L1"], "evaluation": {"shards": 4}, "defenses": ["data_marking"]}
    cfg = config_mod.from_dict(raw)
    defended = results / "defense" / "data_marking" / "evaluate" / "L1" / "static" / "benign" / "shard0.jsonl"
    evaluate_shard(cfg, "L1", "static", "benign", 0, out=defended, defense="data_marking", **kwargs)
    every = len(shard.read_text().splitlines()) + len(defended.read_text().splitlines())
    args = dict(table=kwargs["table"], spec=kwargs["spec"], results_dir=results, sample=every)
    report = verify_rollouts(cfg, [shard, defended], out=tmp_path / "v.json", **args)
    # Each defended episode shares its undefended pair's id: both are sampled, under distinct names.
    assert report["verified"] == every and report["differing"] == 0
    assert sum(k.startswith("defense/data_marking/") for k in report["rollouts"]) == every // 2
    original = defended.read_text()
    try:
        changed = [json.loads(line) for line in original.splitlines()]
        changed[0]["final_output"] += " "
        defended.write_text("".join(json.dumps(r) + "\n" for r in changed))
        with pytest.raises(DeterminismError, match="1 of"):
            verify_rollouts(cfg, [shard, defended], out=tmp_path / "b.json", **args)
        detail = json.loads((tmp_path / "b.json").read_text())["details"][0]
        assert detail["shard"] == str(defended) and detail["fields"] == ["final_output"]
    finally:
        defended.write_text(original)


def test_the_determinism_check_reruns_an_llm_monitor_shard_with_the_threshold_its_calibration_fixes(
    sealed, tmp_path
):
    _, results, shard, kwargs = sealed
    cfg = config_mod.from_dict({"lineages": ["L1"], "evaluation": {"shards": 4}, "defenses": ["llm_monitor"]})
    # Benign items for the calibration: this lineage's acquisition record (here, unattacked rollouts).
    target = results / "acquire" / "L1" / "rollouts.jsonl"
    before = target.read_text()
    target.write_text(shard.read_text())
    try:
        lineage = results / "defense" / "llm_monitor" / "evaluate" / "L1"
        watched = lineage / "static" / "benign" / "shard0.jsonl"
        evaluate_shard(
            cfg, "L1", "static", "benign", 0, out=watched, defense="llm_monitor", acquisition=target, **kwargs
        )
        records = [json.loads(line) for line in watched.read_text().splitlines()]
        assert records and len({r["monitor_threshold"] for r in records}) == 1
        n = len(records)
        args = dict(table=kwargs["table"], spec=kwargs["spec"], results_dir=results, sample=n)
        report = verify_rollouts(cfg, [watched], out=tmp_path / "v.json", **args)
        assert report["verified"] == n and report["differing"] == 0
    finally:
        target.write_text(before)
