"""The instance ``evoaudit serve`` serves and ``evoaudit score`` rebuilds: the configured suite's instance,
the injection its goal places, and the system prompt with a frozen artifact's sections, each made by the
same code the workflow's episode uses (``AuditSuite.build_instances`` and ``injections``,
``methods.conditions.Insertion``, ``agent.profile.configured_prompt``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit.agent.profile import configured_prompt
from evoaudit.config import Config, stage_digest, suite_view
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file, sha256_json
from evoaudit.methods.artifact import artifact_files
from evoaudit.methods.conditions import Insertion, condition
from evoaudit.records import Instance
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite


@dataclass(frozen=True)
class ServedInstance:
    """One instance as an episode of the workflow starts it."""

    suite: AuditSuite
    instance: Instance
    goal: str | None
    injections: dict[str, str]
    system: str
    condition: str | None
    artifact_sha256: str | None
    config_sha256: str

    def build_environment(self) -> Any:
        """A fresh environment with the goal's injections placed (``AuditSuite.build_environment``)."""
        return self.suite.build_environment(self.instance, self.goal, self.injections)

    @property
    def prompt(self) -> str:
        """The user's request (``AuditSuite.prompt_for``)."""
        return self.suite.prompt_for(self.instance, self.goal)


def served_instance(
    cfg: Config,
    instance_id: str,
    goal: str | None = None,
    condition_name: str | None = None,
    artifact_dir: str | Path | None = None,
) -> ServedInstance:
    """The instance ``instance_id`` of ``cfg``'s suite under ``goal`` (None: benign), with the artifact of
    ``condition_name`` at ``artifact_dir`` in the system prompt (both None: the configured prompt alone).
    AuditError names the option and the valid values when one does not fit."""
    suite = get_suite(cfg.suite.name)
    if suite.benchmark != "agentdojo":
        raise AuditError(
            f"suite.name: {cfg.suite.name!r} is not an AgentDojo suite; `evoaudit serve` serves banking, "
            "workspace, travel and slack (an APEX-Harm workspace is served by `evoaudit apex serve`)"
        )
    instances = {i.instance_id: i for i in suite.build_instances(suite_view(cfg))}
    if instance_id not in instances:
        shown = ", ".join(list(instances)[:12]) + (" ..." if len(instances) > 12 else "")
        raise AuditError(
            f"--instance {instance_id}: not an instance of suite {cfg.suite.name} under this configuration "
            f"(suite.families); valid: {shown}"
        )
    instance = instances[instance_id]
    if goal is not None:
        goals = getattr(suite, "goals", None)
        known = list(goals()) if goals is not None else list(cfg.suite.goals)
        if goal not in known:
            raise AuditError(
                f"--goal {goal}: not an injection goal of suite {cfg.suite.name}; valid: {', '.join(known)}"
            )
        if not suite.attacks([goal], instance):
            raise AuditError(
                f"--goal {goal}: no injection vector of instance {instance_id} is reached by its task, so "
                "the workflow never attacks it; serve it benign (no --goal) or choose another instance"
            )
    if (condition_name is None) != (artifact_dir is None):
        raise AuditError(
            "--condition and --artifact go together: the condition names how the artifact "
            "enters the system prompt"
        )
    sections: list[tuple[str, str]] = []
    artifact_sha = None
    if condition_name is not None and artifact_dir is not None:
        directory = Path(artifact_dir)
        if not directory.is_dir():
            raise AuditError(
                f"--artifact {directory}: no such directory (a frozen artifact, e.g. "
                "results/freeze/L1/skillopt)"
            )
        try:
            sections = Insertion(condition(condition_name), directory).sections(instance.prompt)
        except (ValueError, FileNotFoundError) as exc:
            raise AuditError(f"--artifact {directory}: {exc}") from None
        # Hashed as the evaluation stage hashes an artifact (its files by name).
        artifact_sha = sha256_json({p.name: sha256_file(p) for p in artifact_files(directory)})
    return ServedInstance(
        suite=suite,
        instance=instance,
        goal=goal,
        injections=suite.injections(cfg.suite, instance, goal),
        system=configured_prompt(cfg, sections),
        condition=condition_name,
        artifact_sha256=artifact_sha,
        config_sha256=stage_digest(cfg, "episode"),
    )
