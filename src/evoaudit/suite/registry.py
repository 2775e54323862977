"""The one door table: every per-suite question (the suite itself, its environment half, its model roles,
its command-line actions, what it needs from the machine, its checker audit, its stage's further inputs)
is answered by ``REGISTRY``, keyed by kind and suite name.

An entry names the object that answers as ``"module:attribute"``; the module is imported on first use, so
reading this table loads no suite (the workflow asks ``stage_inputs`` while it parses, and the Banking
audit never loads APEX-Harm or its optional dependencies). The doors above it (``get_suite`` here,
``environments.get_environment``, ``roles.get_roles``, ``commands.get_commands``, ``machine.check``) are
typed views of the same table, and a suite's folder never imports a door's table back, so ``suite/`` has
no import circle.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Literal

from evoaudit.config import Config, ConfigError, suite_view
from evoaudit.suite.interface import AuditSuite, CheckerAudit

Kind = Literal["suite", "environments", "roles", "commands", "machine", "checker_audit", "stage_inputs"]

_BANKING = "evoaudit.suite.agentdojo.banking"
_OFFICIAL = ("workspace", "travel", "slack")  # AgentDojo's other suites, on their own terms (official.py)

# (kind, suite) -> "module:attribute". A class or a zero-argument factory gives the object (suite,
# environments, roles, commands, checker_audit); a function answers with the configuration (machine:
# cfg -> unmet needs, every registered one asked for every run; stage_inputs: cfg -> {name: path}).
REGISTRY: dict[tuple[Kind, str], str] = {
    ("suite", "banking"): f"{_BANKING}.adapter:BankingSuite",
    ("suite", "apex"): "evoaudit.suite.apex.adapter:ApexSuite",
    ("environments", "banking"): f"{_BANKING}.environments:BankingEnvironments",
    ("environments", "apex"): "evoaudit.suite.apex.environment:ApexEnvironments",
    ("checker_audit", "banking"): f"{_BANKING}.adapter:BankingSuite",
    ("roles", "apex"): "evoaudit.suite.apex.roles:ApexRoles",
    ("commands", "apex"): "evoaudit.suite.apex.commands:ApexCommands",
    ("machine", "apex"): "evoaudit.suite.apex.machine:missing",
    ("stage_inputs", "apex"): "evoaudit.suite.apex.layout:stage_inputs",
    **{("suite", s): f"evoaudit.suite.agentdojo.{s}.adapter:suite" for s in _OFFICIAL},
    **{("environments", s): f"evoaudit.suite.agentdojo.{s}.tools:environments" for s in _OFFICIAL},
    # Reached through their checker audit alone (the same ``audit.suite()`` their AuditSuite delegates
    # to), so the multi-suite checker table loads no more than it needs.
    **{("checker_audit", s): f"evoaudit.suite.agentdojo.{s}.audit:suite" for s in _OFFICIAL},
}


# What a missing entry of each kind means, for the error that names it.
_MISSING: dict[Kind, str] = {
    "suite": "unknown suite {name!r}",
    "environments": "no environment registered for suite {name!r}",
    "roles": "suite {name!r} has no judge or attacker roles",
    "commands": "suite {name!r} has no command-line actions",
    "machine": "suite {name!r} states no machine requirements",
    "checker_audit": "no checker audit for suite {name!r}",
    "stage_inputs": "suite {name!r} has no further stage inputs",
}


def names(kind: Kind) -> list[str]:
    """The suites that answer ``kind``, sorted."""
    return sorted(name for k, name in REGISTRY if k == kind)


def resolve(kind: Kind, name: str, field: str = "suite.name") -> Any:
    """The registered attribute for (``kind``, ``name``), imported on first use; a ValueError naming
    ``field`` and the suites that answer ``kind`` when there is none."""
    try:
        ref = REGISTRY[(kind, name)]
    except KeyError:
        missing = _MISSING[kind].format(name=name)
        raise ValueError(f"{field}: {missing}; known: {names(kind)} (evoaudit.suite.registry)") from None
    module, attr = ref.split(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise ValueError(
            f"{field}: suite {name!r} is registered but {module} could not be imported ({exc})"
        ) from exc


def get_suite(name: str) -> AuditSuite:
    """The suite ``name``, one object per process (built by its registered factory on first use)."""
    factory = resolve("suite", name)
    made = _SUITE_OBJECTS.get(name)
    if made is not None and made[0] is factory:
        return made[1]
    with _SUITE_LOCK:
        made = _SUITE_OBJECTS.get(name)
        if made is None or made[0] is not factory:
            made = _SUITE_OBJECTS[name] = (factory, factory())
    return made[1]


def get_checker_audit(name: str) -> CheckerAudit:
    return resolve("checker_audit", name, "extra_suites.checker_audit")()


def stage_inputs(cfg: Config) -> dict[str, str]:
    """The further input files of the configured suite's instance stage, by name (``AuditSuite
    .make_instances`` receives them under the same names), as workflow inputs."""
    if ("stage_inputs", cfg.suite.name) not in REGISTRY:
        return {}
    return resolve("stage_inputs", cfg.suite.name)(cfg)


def check_selection(cfg: Config, source: str) -> None:
    """Stop a configuration whose ``suite.families`` or ``apex.tasks`` names an id its suite does not have
    (ConfigError naming the file, the field and the valid ids), or whose selection leaves nothing to learn
    on. Called where a configuration enters a run (the workflow's start, the ``evoaudit`` commands); the
    config module itself loads no suite, so replay's jobs stay clear of the suites' metric code."""
    try:
        refused = get_suite(cfg.suite.name).unsupported_defenses
        for name in cfg.defenses:
            if name in refused:
                raise ValueError(
                    f"defenses: {name!r} does not run on suite {cfg.suite.name!r}: {refused[name]}; remove it"
                )
        view = suite_view(cfg)
        get_suite(cfg.suite.name).check_selection(view)
        if cfg.apex.tasks is not None:  # the APEX-Harm half of any run (apex.enabled) takes its tasks here
            get_suite("apex").families(view)  # raises naming apex.tasks and the valid ids
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def suite_defenses(name: str, defenses: list[str] | tuple[str, ...]) -> list[str]:
    """Those of ``defenses`` suite ``name`` runs, in order (APEX-Harm's own rules run only these)."""
    refused = get_suite(name).unsupported_defenses
    return [d for d in defenses if d not in refused]


# One suite object per process and name, made on first use. Safe to share: a suite object holds no state
# of a run (its episodes' environments, sessions and configuration are passed to it), only what its
# constructor fixes; the lock keeps threads from building one twice. Kept with the factory that made it, so
# a factory replaced in ``REGISTRY`` (or in its module) is honoured.
_SUITE_OBJECTS: dict[str, tuple[Any, AuditSuite]] = {}
_SUITE_LOCK = threading.Lock()
