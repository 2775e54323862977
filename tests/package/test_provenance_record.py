"""Provenance: every field a reviewer needs, merged per output directory, never a secret."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from evoaudit import config as config_mod
from evoaudit.config import config_sha256
from evoaudit.provenance import PACKAGES, provenance, write_provenance
from evoaudit.records import Manifest

REQUIRED = {
    "config_sha256",
    "code",
    "packages",
    "suite_spec_sha256",
    "executor",
    "optimizer",
    "seeds",
    "manifest_root",
    "seal_scope",
    "infra_failure_policy",
}


def test_provenance_names_config_code_packages_spec_fingerprints_seeds_root_and_policy(tmp_path, cfg):
    spec = tmp_path / "suite_spec.json"
    spec.write_text("{}")
    manifest = tmp_path / "manifest.json"
    Manifest(entries=[], root="ab" * 32).write(manifest)
    p = provenance(cfg, stage="evaluate", spec=spec, manifest=manifest, executor={"backend": "sim"})
    assert REQUIRED <= set(p)
    assert set(p["packages"]) == set(PACKAGES) and p["packages"]["agentdojo"] == "0.1.35"
    assert set(p["code"]) == {"revision", "dirty"}
    assert p["config_sha256"] == config_sha256(cfg) and p["manifest_root"] == "ab" * 32
    assert p["seeds"]["global"] == cfg.seed and p["suite_spec_sha256"]
    assert p["executor"] == {"backend": "sim"} and p["optimizer"]["sampling"]["temperature"] == 1.0


def test_seal_scope_is_recorded():
    cfg = config_mod.from_dict({"seal": {"seal_scope": "lineage"}})
    assert provenance(cfg)["seal_scope"] == "lineage"


def test_endpoint_fingerprints_carry_no_key_and_no_key_variable_value(monkeypatch):
    monkeypatch.setenv("EVOAUDIT_TEST_KEY", "sk-sentinel-provenance-0000")
    cfg = config_mod.from_dict(
        {
            "executor": {
                "backend": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key_env": "EVOAUDIT_TEST_KEY",
            },
        }
    )
    text = json.dumps(provenance(cfg))
    assert "sk-sentinel-provenance-0000" not in text
    assert "http://127.0.0.1:9/v1" in text  # the fingerprint is real, just keyless


def _write(args: tuple[str, int]) -> None:
    directory, i = args
    write_provenance(Path(directory) / f"shard{i}.jsonl", config_mod.from_dict({}), "evaluate")


def test_parallel_jobs_writing_one_directory_all_keep_their_entry(tmp_path):
    # Spawned, not forked: a fork copies whatever lock another test's thread held at that moment.
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_write, [(str(tmp_path), i) for i in range(8)])
    data = json.loads((tmp_path / "provenance.json").read_text())
    assert sorted(data) == sorted(f"shard{i}.jsonl" for i in range(8))
    assert all(v["stage"] == "evaluate" for v in data.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["provenance.json"]  # no lock or temporary files


def test_an_artifact_directorys_provenance_sits_beside_it_not_inside_the_frozen_files(tmp_path, cfg):
    artifact = tmp_path / "artifacts" / "L1" / "skillopt"
    artifact.mkdir(parents=True)
    write_provenance(artifact, cfg, "evolve", method="skillopt")
    assert list(artifact.iterdir()) == []
    assert "skillopt" in json.loads((artifact.parent / "provenance.json").read_text())
