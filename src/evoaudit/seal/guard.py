"""The unseal guard: the only way to obtain endpoint variants is through a verified freeze manifest.

Protocol rule (endpoint blindness): no learned state may have been produced after anything saw an
endpoint variant. The suite stage writes endpoint variants to their own file, which no rule before unseal
takes as input; ``load_endpoint_instances`` opens it only when its sha256 is the one the suite spec
committed, the freeze manifest verifies file by file, and an unseal event names that manifest's root.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evoaudit.hashing import sha256_file
from evoaudit.records import Instance, LineageOpening, Manifest, SuiteSpec, UnsealEvent, read_unseal_event
from evoaudit.seal.manifest import SealError, read_manifest, verify_manifest
from evoaudit.suite.instances import read_endpoint_table, read_instance_table

RULE = "protocol rule 'endpoint blindness' (endpoint variants stay sealed until every artifact is frozen)"


def load_learning_instances(
    table: str | Path, endpoint_variants: tuple[str, ...], spec: str | Path | None = None
) -> list[Instance]:
    """Acquisition and validation instances only; endpoint variants are dropped, never returned.

    ``endpoint_variants`` (the config's roles) must list every endpoint variant of the frozen suite spec
    (``spec``, by default ``suite_spec.json`` beside the table), and an instance the suite stage recorded
    as an endpoint instance is dropped whatever the roles say. The sealed endpoint file is refused."""
    spec_path = Path(spec) if spec is not None else Path(table).with_name("suite_spec.json")
    checked = spec is not None or spec_path.exists()
    if checked:
        check_roles(endpoint_variants, spec_path)
    instances = read_instance_table(table)  # the sealed endpoint file, marked, is refused here
    if checked:
        check_table(table, spec_path)  # and any other table, marked or not, here
    return [i for i in instances if i.variant not in endpoint_variants and i.role != "endpoint"]


def check_table(table: str | Path, spec_path: str | Path) -> None:
    """``table`` must be the suite's own instance table: its sha256 the one the frozen suite spec committed
    (``instances_sha256``). Content, not labels: the sealed endpoint file with its parquet metadata
    stripped, or any other table, is refused."""
    committed = SuiteSpec.read(spec_path).instances_sha256
    actual = sha256_file(table)
    if actual != committed:
        raise SealError(
            f"{RULE}: {table} has sha256 {actual}, but the suite spec {spec_path} committed the instance "
            f"table {committed}; only the suite's own instance table may be learned from - point the "
            "stage at the table the suite stage wrote, or rerun the suite stage (rule instances)"
        )


def check_roles(endpoint_variants: tuple[str, ...], spec_path: str | Path) -> None:
    """The config's endpoint variants must include every endpoint variant the frozen suite spec sealed."""
    sealed = SuiteSpec.read(spec_path).endpoint_variants
    unlisted = sorted(set(sealed) - set(endpoint_variants))
    if unlisted:
        raise SealError(
            f"{RULE}: roles: variant(s) {unlisted} are endpoint variants of the frozen suite spec "
            f"{spec_path} (sealed: {sorted(sealed)}), but roles.benign_endpoint and roles.attacked_endpoint "
            f"list only {sorted(endpoint_variants)}; a roles override cannot turn an endpoint variant into a "
            "learning one - restore the roles, or change them and rerun the suite stage"
        )


def load_instances(
    table: str | Path,
    variants: tuple[str, ...],
    endpoint_variants: tuple[str, ...],
    manifest: Manifest | None = None,
    results_dir: str | Path = "results",
) -> list[Instance]:
    """Instances of ``variants`` from one table. Endpoint variants (by ``endpoint_variants`` or by the role
    the suite stage recorded) need a verified freeze manifest.

    Since the suite stage writes endpoint variants to their own file, stages go through
    ``load_endpoint_instances``, which also checks the file's hash and the unseal event."""
    sealed = sorted(set(variants) & set(endpoint_variants))
    if manifest is None:
        if sealed:
            raise SealError(
                f"{RULE}: variants {sealed} are sealed endpoint variants and may only be loaded with a "
                "verified freeze manifest; run the freeze and unseal stages first"
            )
        chosen = [i for i in read_instance_table(table) if i.variant in variants]
        recorded = sorted({i.variant for i in chosen if i.role == "endpoint"})
        if recorded:
            raise SealError(
                f"{RULE}: {table} records variants {recorded} as endpoint variants (role endpoint), which "
                "need a verified freeze manifest whatever the config's roles list; run the freeze and unseal "
                "stages first"
            )
        return chosen
    try:
        verify_manifest(manifest, Path(results_dir))
    except SealError as exc:
        raise SealError(
            f"{RULE}: the freeze manifest does not verify, so {sealed} stay sealed: {exc}"
        ) from exc
    return [i for i in read_endpoint_table(table) if i.variant in variants]


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
    spec = SuiteSpec.read(spec_path)
    committed = spec.endpoint_sha256
    actual = sha256_file(endpoint_table)
    if actual != committed:
        raise SealError(
            f"{RULE}: {endpoint_table} has sha256 {actual}, the suite spec {spec_path} committed "
            f"{committed}; the endpoint file changed after the suite stage - rerun it"
        )
    assert_unsealed(Path(event_path), manifest)
    endpoint = tuple(spec.endpoint_variants)
    wanted = endpoint if variants is None else variants
    return load_instances(endpoint_table, wanted, endpoint, manifest, results_dir)


@dataclass(frozen=True)
class OpenedEndpoints:
    """The endpoint table opened past a verified unseal (``open_endpoints``)."""

    # The freeze manifest that verified, for checking a deployed artifact's files against it.
    manifest: Manifest
    # The endpoint instances of the variants asked for.
    instances: list[Instance]


def open_endpoints(
    endpoint_table: Path,
    spec_path: Path,
    manifest_path: Path,
    event_path: Path,
    results_dir: Path,
    variants: tuple[str, ...] | None = None,
) -> OpenedEndpoints:
    """The one seal call a stage makes to open the endpoint table: reads the manifest at
    ``manifest_path``, then ``load_endpoint_instances`` (the file's committed hash, the unseal event for
    the manifest's root, the manifest verified file by file)."""
    manifest = read_manifest(manifest_path)
    opened = load_endpoint_instances(endpoint_table, spec_path, manifest, event_path, results_dir, variants)
    return OpenedEndpoints(manifest, opened)


def assert_unsealed(event_path: Path, manifest: Manifest) -> UnsealEvent | LineageOpening:
    """The unseal event must exist and name the manifest root in hand."""
    if not event_path.exists():
        raise SealError(f"{RULE}: no unseal event at {event_path}; run the unseal stage first")
    event = read_unseal_event(event_path)
    if event.manifest_root != manifest.root:
        raise SealError(
            f"{RULE}: unseal event {event_path} is for manifest root {event.manifest_root}, "
            f"not the current {manifest.root}; rerun unseal"
        )
    return event
