"""Build the configured backend for a role (executor or optimizer)."""

from __future__ import annotations

from collections.abc import Callable

from evoaudit.config import Config, EndpointConfig
from evoaudit.models.base import ChatBackend
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.records import Instance
from evoaudit.suite.interface import AuditSuite
from evoaudit.suite.registry import get_suite


def _tools_simulator(
    cfg: Config, endpoint: EndpointConfig, instances: list[Instance], suite: AuditSuite
) -> ChatBackend:
    # The poisoning extension's goals are granted like the configured ones, so a poisoned acquisition
    # episode's agent can obey its injection (none configured: the list is suite.goals, as before).
    goals = list(cfg.suite.goals) + [g for g in cfg.poisoning.goals if g not in cfg.suite.goals]
    # Without instances the oracle keeps its own default suite, as it always has.
    oracle = Oracle.from_instances(instances, goals, source=suite if instances else None)
    return SimBackend(oracle, cfg.sim, endpoint.model)


def _analyst_simulator(
    cfg: Config, endpoint: EndpointConfig, instances: list[Instance], suite: AuditSuite
) -> ChatBackend:
    # Loaded only for an APEX-Harm workspace suite, like the suite itself.
    from evoaudit.models.sim.apex import ApexOracle, ApexSimBackend

    # The poisoning extension's standing rules, granted as the tools simulator is granted its goals
    # (``suite.goal_text``, as ``SimOracle`` has it): the planted sleeper acts on them.
    rules = tuple(suite.goal_text(g) for g in cfg.poisoning.goals)  # type: ignore[attr-defined]
    return ApexSimBackend(ApexOracle.from_instances(instances), cfg.sim, endpoint.model, rules)


# The simulator of each behaviour a suite can ask for (``AuditSuite.simulator``).
_SIMULATORS: dict[str, Callable[[Config, EndpointConfig, list[Instance], AuditSuite], ChatBackend]] = {
    "tools": _tools_simulator,
    "analyst": _analyst_simulator,
}


def make_backend(
    cfg: Config,
    endpoint: EndpointConfig,
    instances: list[Instance],
    *,
    role: str | None = None,
    suite: AuditSuite | None = None,
) -> ChatBackend:
    """``instances`` grant the simulator its oracle plans; the openai backend ignores them. ``role``: where
    the endpoint is in the config (optimizer, apex.judge, ...), named by errors that point at a field.
    ``suite``: the instances' suite object when the caller holds it (else it is resolved here)."""
    if endpoint.backend == "sim":
        # The simulator of the suite the instances come from (the configured suite's without instances):
        # which behaviour it simulates is the suite's to say (``AuditSuite.simulator``).
        suites = {i.suite for i in instances} or {cfg.suite.name}
        if len(suites) > 1:
            raise ValueError(f"one simulator serves one suite; these instances come from {sorted(suites)}")
        name = suites.pop()
        if suite is None or suite.name != name:
            suite = get_suite(name)
        kind = suite.simulator
        try:
            build = _SIMULATORS[kind]
        except KeyError:
            raise ValueError(f"no simulator plays {kind!r}; known: {sorted(_SIMULATORS)}") from None
        return build(cfg, endpoint, instances, suite)
    if endpoint.backend == "openai":
        from evoaudit.models.openai_backend import OpenAIBackend

        return OpenAIBackend(endpoint, role=role)
    raise ValueError(f"unknown backend {endpoint.backend!r}")
