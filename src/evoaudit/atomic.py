"""Writes that a kill cannot tear: a later stage sees the old file, or none, or the whole new one.

The bytes go to a temporary file in the same directory (so the rename stays on one file system), are
fsynced, and the temporary file is renamed over the target; the directory is fsynced so the rename
itself survives a power cut. A killed writer leaves at most a ``.<name>.*.tmp`` file, which no stage reads.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some file systems do not open directories; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes(path, text.encode(encoding))


def write_bytes_if_changed(path: str | Path, data: bytes) -> bool:
    """``write_bytes`` unless ``path`` already holds exactly ``data`` (then it is left untouched, time stamp
    included, so Snakemake sees no newer input); True when it wrote."""
    path = Path(path)
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    write_bytes(path, data)
    return True
