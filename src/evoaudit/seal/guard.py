"""The unseal guard: the only way to obtain endpoint variants is through a verified freeze manifest.

Protocol rule (endpoint blindness): no learned state may have been produced after anything saw an
endpoint variant. Code that loads instances therefore refuses endpoint variants unless it is handed a
freeze manifest whose every file is present with its recorded hash.
"""

from __future__ import annotations

import json
from pathlib import Path

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
    """Instances of ``variants``. Endpoint variants need a verified freeze manifest."""
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
