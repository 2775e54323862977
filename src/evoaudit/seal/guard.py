"""The unseal guard: the only way to obtain endpoint variants is through a verified freeze manifest.

Protocol rule (endpoint blindness): no learned state may have been produced after anything saw an
endpoint variant. The suite stage writes endpoint variants to their own file, which no rule before unseal
takes as input; ``load_endpoint_instances`` opens it only when its sha256 is the one the suite spec
committed, the freeze manifest verifies file by file, and an unseal event names that manifest's root.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.hashing import sha256_file
from evoaudit.records import Instance, Manifest
from evoaudit.seal.manifest import SealError, verify_manifest
from evoaudit.suite.instances import read_instance_table

RULE = "protocol rule 'endpoint blindness' (endpoint variants stay sealed until every artifact is frozen)"


def load_learning_instances(table: str | Path, endpoint_variants: tuple[str, ...]) -> list[Instance]:
    """Acquisition and validation instances only; endpoint variants are dropped, never returned."""
    return [i for i in read_instance_table(table) if i.variant not in endpoint_variants]


def load_instances(
    table: str | Path,
    variants: tuple[str, ...],
    endpoint_variants: tuple[str, ...],
    manifest: Manifest | None = None,
    results_dir: str | Path = "results",
) -> list[Instance]:
    """Instances of ``variants`` from one table. Endpoint variants need a verified freeze manifest.

    Since the suite stage writes endpoint variants to their own file, stages go through
    ``load_endpoint_instances``, which also checks the file's hash and the unseal event."""
    sealed = sorted(set(variants) & set(endpoint_variants))
    if sealed:
        if manifest is None:
            raise SealError(
                f"{RULE}: variants {sealed} are sealed endpoint variants and may only be loaded with a "
                "verified freeze manifest; run the freeze and unseal stages first"
            )
        try:
            verify_manifest(manifest, Path(results_dir))
        except SealError as exc:
            raise SealError(
                f"{RULE}: the freeze manifest does not verify, so {sealed} stay sealed: {exc}"
            ) from exc
    return [i for i in read_instance_table(table) if i.variant in variants]


def load_endpoint_instances(
    endpoint_table: Path,
    spec_path: Path,
    manifest: Manifest,
    event_path: Path,
    results_dir: Path,
    variants: tuple[str, ...] | None = None,
) -> list[Instance]:
    """Endpoint instances (of ``variants``, default all), only from the file whose sha256 the suite spec
    committed, and only with a verified manifest and an unseal event for its root."""
    spec = json.loads(Path(spec_path).read_text())
    committed = spec.get("endpoint_sha256")
    if committed is None:
        raise SealError(f"{RULE}: {spec_path} commits no endpoint_sha256; rerun the suite stage")
    actual = sha256_file(endpoint_table)
    if actual != committed:
        raise SealError(
            f"{RULE}: {endpoint_table} has sha256 {actual}, the suite spec {spec_path} committed "
            f"{committed}; the endpoint file changed after the suite stage - rerun it"
        )
    assert_unsealed(Path(event_path), manifest)
    endpoint = tuple(spec.get("endpoint_variants", ()))
    wanted = endpoint if variants is None else variants
    return load_instances(endpoint_table, wanted, endpoint, manifest, results_dir)


def assert_unsealed(event_path: Path, manifest: Manifest) -> dict:
    """The unseal event must exist and name the manifest root in hand."""
    if not event_path.exists():
        raise SealError(f"{RULE}: no unseal event at {event_path}; run the unseal stage first")
    event = json.loads(event_path.read_text())
    if event.get("manifest_root") != manifest.root:
        raise SealError(
            f"{RULE}: unseal event {event_path} is for manifest root {event.get('manifest_root')}, "
            f"not the current {manifest.root}; rerun unseal"
        )
    return event
