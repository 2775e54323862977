"""The instance table every later stage reads: its file format, and the seal on the endpoint file.

Each suite builds its own instances (``AuditSuite.build_instances``); this module only writes and reads
them, so a stage that reads the table loads no suite."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from evoaudit import atomic
from evoaudit.errors import AuditError
from evoaudit.hashing import canonical_json, sha256_json
from evoaudit.records import Instance

# Parquet schema metadata that marks the sealed endpoint file; ``read_instance_table`` refuses such a file.
SEALED_KEY = b"evoaudit.sealed"
SEALED_VALUE = b"endpoint variants"


class SealedTableError(AuditError):
    """A sealed endpoint file was about to be read outside ``seal.guard``."""


def write_instances(instances: Iterable[Instance], path: str | Path, *, sealed: bool = False) -> str:
    """Write the table as parquet (index columns plus one canonical JSON record per row); ``sealed`` marks
    the file as the sealed endpoint file, which only ``seal.guard`` opens.

    Returns the sha256 over the records, which later stages assert.
    """
    import pandas as pd  # here, not at the top: the many jobs that only read the table never need pandas

    rows = [inst.model_dump(mode="json") for inst in instances]
    frame = pd.DataFrame(
        {
            "instance_id": [r["instance_id"] for r in rows],
            "family": [r["family"] for r in rows],
            "variant": [r["variant"] for r in rows],
            "role": [r["role"] for r in rows],
            "split": [r["split"] for r in rows],
            "record": [canonical_json(r) for r in rows],
        }
    )
    buffer = io.BytesIO()
    if sealed:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), SEALED_KEY: SEALED_VALUE})
        pq.write_table(table, buffer)
    else:
        frame.to_parquet(buffer, index=False)
    atomic.write_bytes(path, buffer.getvalue())
    return sha256_json(rows)


def _read_records(path: str | Path) -> tuple[list[Instance], bool]:
    import pyarrow.parquet as pq  # pyarrow alone: pandas would add half a second to every job's start

    table = pq.read_table(path, columns=["record"])
    sealed = (table.schema.metadata or {}).get(SEALED_KEY) == SEALED_VALUE
    records = table.column("record").to_pylist()
    return [Instance.model_validate_json(text) for text in records], sealed


def read_instance_table(path: str | Path) -> list[Instance]:
    """Every instance of an unsealed table. The sealed endpoint file is refused: it opens only through
    ``seal.guard.load_endpoint_instances`` (verified manifest, unseal event)."""
    instances, sealed = _read_records(path)
    if sealed:
        raise SealedTableError(
            f"protocol rule 'endpoint blindness': {path} is the sealed endpoint file; it is opened only "
            "through the seal (seal.guard.load_endpoint_instances: the suite spec's sha256, a verified "
            "freeze manifest and an unseal event) - e.g. `evoaudit replay --spec ... --manifest ... "
            "--event ...`"
        )
    return instances


def read_endpoint_table(path: str | Path) -> list[Instance]:
    """The sealed endpoint file's instances. Only ``seal.guard`` calls this, after its checks
    (``tests/seal/test_seal_one_door.py`` pins that)."""
    return _read_records(path)[0]
