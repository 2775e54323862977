"""Build the configured backend for a role (executor or optimizer)."""

from __future__ import annotations

from evoaudit.config import Config, EndpointConfig
from evoaudit.models.base import ChatBackend
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.records import Instance
from evoaudit.suite.registry import get_suite


def make_backend(
    cfg: Config, endpoint: EndpointConfig, instances: list[Instance], *, role: str | None = None
) -> ChatBackend:
    """``instances`` grant the simulator its oracle plans; the openai backend ignores them. ``role``: where
    the endpoint is in the config (optimizer, apex.judge, ...), named by errors that point at a field."""
    if endpoint.backend == "sim":
        # The simulator of the suite the instances come from (the configured suite's without instances):
        # which behaviour it simulates is the suite's to say (``AuditSuite.simulator``).
        suites = {i.suite for i in instances} or {cfg.suite.name}
        if len(suites) > 1:
            raise ValueError(f"one simulator serves one suite; these instances come from {sorted(suites)}")
        if get_suite(suites.pop()).simulator == "analyst":
            from evoaudit.models.sim.apex import ApexOracle, ApexSimBackend

            return ApexSimBackend(ApexOracle.from_instances(instances), cfg.sim, endpoint.model)
        return SimBackend(Oracle.from_instances(instances, list(cfg.suite.goals)), cfg.sim, endpoint.model)
    if endpoint.backend == "openai":
        from evoaudit.models.openai_backend import OpenAIBackend

        return OpenAIBackend(endpoint, role=role)
    raise ValueError(f"unknown backend {endpoint.backend!r}")
