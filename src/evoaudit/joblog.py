"""One workflow job's log: logging, stdout, stderr and a failure's message all go to the rule's log file.

The stage scripts in ``scripts/`` run every stage inside ``job_log(snakemake.log[0])``, so a job's log
reads as the ``evoaudit -v`` command's output did: INFO lines, then the error that stopped it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from evoaudit.config import ConfigError
from evoaudit.errors import AuditError

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def job_log(path: str | Path) -> Iterator[None]:
    """Send everything the job writes to ``path``; an exception is written there too, then re-raised."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    with open(path, "w", encoding="utf-8", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter(FORMAT))
        previous = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                yield
        except (AuditError, ConfigError) as exc:
            # The same line the CLI prints, so a failed job's log names the rule that stopped it.
            fh.write(f"evoaudit: {type(exc).__name__}: {exc}\n")
            raise
        except Exception:
            logging.getLogger("evoaudit").exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
            root.setLevel(previous)
