"""What one acquisition or evaluation job of the audit derives from its configuration, built once by its
stage entry point (``EpisodeJob.acquisition``, ``EpisodeJob.evaluation``): the configuration its episodes
run under (a transfer job's derived one), the suite object, the runner's settings and the instances it
reads. The layers below take what they need from it instead of deriving it again (APEX-Harm's shards
have their own, ``evaluate.apex.shard.ApexShardJob``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evoaudit.agent.profile import agent_prompt
from evoaudit.config import Config
from evoaudit.evaluate.runner import RunSettings
from evoaudit.records import Arm, Instance, Manifest
from evoaudit.seal.guard import load_learning_instances, open_endpoints
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite
from evoaudit.suite.stage import endpoint_table_path, verify_table


@dataclass(frozen=True)
class EpisodeJob:
    """One acquisition or evaluation job's derived configuration, suite and instances."""

    cfg: Config
    """The configuration the episodes run under: the workflow's, or a transfer job's derived one
    (``transfer_config.evaluation_config``); provenance, the backend and the monitor read it."""

    suite: AuditSuite
    """The configured suite's object (``registry.get_suite(cfg.suite.name)``), resolved once."""

    run: RunSettings
    """What the runner reads of ``cfg`` (``RunSettings.of``), read once."""

    instances: tuple[Instance, ...]
    """The instances the job reads, read once: acquisition's learning instances (their acquisition
    variants are planned; all of them grant the simulator its plans), or evaluation's endpoint instances of
    the arm's variants."""

    manifest: Manifest | None = None
    """Evaluation: the freeze manifest that verified, to check the deployed artifact's files against."""

    @classmethod
    def acquisition(cls, cfg: Config, table: Path, spec: Path) -> EpisodeJob:
        """An acquisition job: the learning instances of ``table``, checked against the frozen ``spec``."""
        verify_table(table, spec)
        learning = load_learning_instances(table, cfg.roles.endpoint_variants, spec)
        return cls._of(cfg, learning)

    @classmethod
    def evaluation(
        cls,
        cfg: Config,
        arm: Arm,
        *,
        table: Path,
        spec: Path,
        manifest_path: Path,
        unseal_event: Path,
        results_dir: Path,
        endpoint: Path | None = None,
        transfer: Path | None = None,
    ) -> EpisodeJob:
        """An evaluation job: the endpoint instances of ``arm``'s variants, opened past a verified unseal.
        ``transfer``: the transfer configuration's record (rule transfer_evaluate), whose configuration
        the episodes run under, derived here from ``cfg``; None: the audit's own."""
        if transfer is not None:
            from evoaudit.transfer_config import evaluation_config  # transfer jobs only

            cfg = evaluation_config(cfg, transfer)
        verify_table(table, spec)
        variants = cfg.roles.benign_endpoint if arm == "benign" else cfg.roles.attacked_endpoint
        # Endpoint variants live in their own file (suite stage), opened only past a verified unseal.
        opened = open_endpoints(
            endpoint or endpoint_table_path(table), spec, manifest_path, unseal_event, results_dir, variants
        )
        return cls._of(cfg, opened.instances, opened.manifest)

    @classmethod
    def _of(cls, cfg: Config, instances: list[Instance], manifest: Manifest | None = None) -> EpisodeJob:
        suite = get_suite(cfg.suite.name)
        # The runner and the planner take this one suite object for every episode.
        others = sorted({i.suite for i in instances} - {suite.name})
        if others:
            raise ValueError(f"instances of suites {others} in a job of suite {suite.name!r}")
        return cls(cfg, suite, RunSettings.of(cfg), tuple(instances), manifest)

    def prompt(self, sections: list[tuple[str, str]] | None = None) -> str:
        """The episodes' system prompt with a condition's ``sections`` (``agent.profile.agent_prompt``)."""
        return agent_prompt(self.suite, self.cfg.agent, sections)
