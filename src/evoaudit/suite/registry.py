"""The suites evoaudit can audit, each an ``interface.AuditSuite``; ``get_suite`` is the door to them.

``SUITES`` maps a name to a zero-argument factory. A suite's modules are imported only when it is asked
for, so the Banking audit never loads the APEX suite (nor its optional dependencies), and reading this
module loads no suite at all (the workflow reads ``stage_inputs`` while parsing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoaudit.config import ConfigError
from evoaudit.suite.interface import AuditSuite, CheckerAudit


def _banking() -> AuditSuite:
    from evoaudit.suite.agentdojo.banking.adapter import BankingSuite

    return BankingSuite()


def _apex() -> AuditSuite:
    # The APEX suite's modules (and the mcp SDK) load only when asked for.
    try:
        from evoaudit.suite.apex.adapter import ApexSuite
    except ImportError as exc:
        raise ValueError(
            f"suite.name: 'apex' is registered but its adapter could not be imported ({exc}); the APEX "
            "suite needs evoaudit.suite.apex.adapter.ApexSuite"
        ) from exc
    return ApexSuite()


def _agentdojo(name: str) -> Callable[[], AuditSuite]:
    # AgentDojo's Workspace, Travel and Slack, audited on their own terms (``agentdojo.official``).
    def factory() -> AuditSuite:
        import importlib

        return importlib.import_module(f"evoaudit.suite.agentdojo.{name}.adapter").suite()

    return factory


SUITES: dict[str, Callable[[], AuditSuite]] = {
    "banking": _banking,
    "apex": _apex,
    "workspace": _agentdojo("workspace"),
    "travel": _agentdojo("travel"),
    "slack": _agentdojo("slack"),
}

# The files a suite's instance stage reads besides the checker audit's summary, as workflow inputs
# (``AuditSuite.make_instances`` receives them under the same names). Kept here, free of the suites'
# imports, because the workflow asks while it parses: APEX-Harm's instances point at the built worlds and
# the frozen attack set.
_STAGE_INPUTS: dict[str, Callable[[Any], dict[str, str]]] = {
    "apex": lambda cfg: {
        "apex_spec": f"{cfg.suite.apex.out}/apex_spec.json",
        "apex_attacks": f"{cfg.suite.apex.out}/attacks.json",
    },
}


def _workspace() -> CheckerAudit:
    from evoaudit.suite.agentdojo.workspace import audit

    return audit.suite()


def _travel() -> CheckerAudit:
    from evoaudit.suite.agentdojo.travel import audit

    return audit.suite()


def _slack() -> CheckerAudit:
    from evoaudit.suite.agentdojo.slack import audit

    return audit.suite()


# The suites whose checker audit the multi-suite table can hold (``extra_suites.checker_audit``): every
# AgentDojo suite. Workspace, Travel and Slack are reached here through their checker audit alone (the
# same ``audit.suite()`` their AuditSuite delegates to), so the table loads no more than it needs.
CHECKER_AUDITS: dict[str, Callable[[], CheckerAudit]] = {
    "banking": _banking,
    "workspace": _workspace,
    "travel": _travel,
    "slack": _slack,
}


def get_checker_audit(name: str) -> CheckerAudit:
    try:
        factory = CHECKER_AUDITS[name]
    except KeyError:
        raise ValueError(
            f"extra_suites.checker_audit: no checker audit for suite {name!r}; "
            f"known: {sorted(CHECKER_AUDITS)}"
        ) from None
    return factory()


def stage_inputs(cfg: Any) -> dict[str, str]:
    """The further input files of the configured suite's instance stage, by name."""
    return _STAGE_INPUTS.get(cfg.suite.name, lambda _cfg: {})(cfg)


def check_selection(cfg: Any, source: str) -> None:
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
        get_suite(cfg.suite.name).check_selection(cfg)
        if cfg.apex.tasks is not None:  # the APEX-Harm half of any run (apex.enabled) takes its tasks here
            get_suite("apex").families(cfg)  # raises naming apex.tasks and the valid ids
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def suite_defenses(name: str, defenses: list[str] | tuple[str, ...]) -> list[str]:
    """Those of ``defenses`` suite ``name`` runs, in order (APEX-Harm's own rules run only these)."""
    refused = get_suite(name).unsupported_defenses
    return [d for d in defenses if d not in refused]


def get_suite(name: str) -> AuditSuite:
    try:
        factory = SUITES[name]
    except KeyError:
        raise ValueError(f"suite.name: unknown suite {name!r}; known: {sorted(SUITES)}") from None
    return factory()
