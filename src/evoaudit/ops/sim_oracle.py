"""The simulator server's oracle source: the instance table behind the seal.

Learning variants come from the instance table; endpoint variants from their own file, only through
a verified freeze manifest and unseal event (``seal.guard``). It lives above the seal layer so that
``models/`` never imports ``seal/``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from evoaudit.config import Config
from evoaudit.models.sim.server import SimHandler
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.paths import Layout
from evoaudit.seal.freeze import read_manifest
from evoaudit.seal.guard import load_endpoint_instances, load_learning_instances
from evoaudit.seal.manifest import SealError
from evoaudit.suite.stage import endpoint_table_path

log = logging.getLogger(__name__)


class TableOracleSource:
    """Builds the oracle from an instance table, adding endpoint variants once a verified manifest exists."""

    def __init__(
        self,
        cfg: Config,
        table: Path,
        manifest: Path | None,
        results_dir: Path,
        endpoint: Path | None = None,
        spec: Path | None = None,
        event: Path | None = None,
    ) -> None:
        self.cfg, self.table, self.manifest, self.results_dir = cfg, table, manifest, results_dir
        # The sealed endpoint file and what opens it: the spec's hash and the unseal event.
        self.endpoint = endpoint or endpoint_table_path(table)
        self.spec = spec or table.with_name("suite_spec.json")
        self.event = event or Path(Layout.at(results_dir).freeze("unseal.json"))
        self._stamp: tuple[float, ...] | None = None

    def _mtimes(self) -> tuple[float, ...]:
        def mtime(p: Path | None) -> float:
            return p.stat().st_mtime if p is not None and p.exists() else 0.0

        return tuple(mtime(p) for p in (self.table, self.manifest, self.endpoint, self.event))

    def changed(self) -> bool:
        return self._mtimes() != self._stamp

    def load(self) -> Oracle:
        self._stamp = self._mtimes()
        if not self.table.exists():
            return Oracle.from_instances([], list(self.cfg.suite.goals))
        endpoint = self.cfg.roles.endpoint_variants
        spec = self.spec if self.spec.exists() else None
        instances = load_learning_instances(self.table, endpoint, spec)
        if self.manifest is not None and self.manifest.exists() and self.event.exists():
            try:
                manifest = read_manifest(self.manifest)
                instances += load_endpoint_instances(
                    self.endpoint, self.spec, manifest, self.event, self.results_dir
                )
            except (SealError, ValueError) as exc:
                log.warning("endpoint variants withheld: %s", exc)
        log.info("oracle: %d instances from %s", len(instances), self.table)
        return Oracle.from_instances(instances, list(self.cfg.suite.goals))


def make_handler(
    cfg: Config,
    table: Path,
    manifest: Path | None,
    results_dir: Path,
    model: str | None = None,
    latency_s: float = 0.0,
    endpoint: Path | None = None,
    spec: Path | None = None,
    event: Path | None = None,
) -> SimHandler:
    source = TableOracleSource(cfg, table, manifest, results_dir, endpoint, spec, event)
    sim = SimBackend(source.load(), cfg.sim, model or cfg.executor.model)
    return SimHandler(sim, latency_s, source)
