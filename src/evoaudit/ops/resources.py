"""Scheduler resources that the rules declare, derived from the configuration.

``api_slots`` is the one rate budget shared by every job: a job that calls a model endpoint claims as many
slots as it can keep requests in flight (its configured concurrency, or fewer where it has fewer episodes
to run at once), so ``snakemake --resources api_slots=N`` bounds the concurrent requests of all jobs
together, on one host or across a cluster.
"""

from __future__ import annotations

from typing import Any

from evoaudit.config import Config, EndpointConfig

#: The rules that send requests to a model endpoint, and the config section of that endpoint.
ENDPOINT_RULES: dict[str, str] = {
    "acquire": "executor",
    "evolve": "optimizer",
    "write_screen": "optimizer",  # the write path's LLM judge screen
    "evaluate": "executor",
    "transfer_evaluate": "executor",
    # The determinism check reruns a sample of rollouts; from the response cache when it is on, else live.
    "verify": "executor",
}


class ResourceError(ValueError):
    """The resources given to the scheduler cannot honour the configured concurrency."""


def _endpoint(cfg: Config, section: str) -> EndpointConfig:
    return getattr(cfg, section)


def api_slots(cfg: Config, rule: str) -> int:
    """Slots a job of ``rule`` claims: its in-job concurrency when it calls a real endpoint, else 0.

    The embedded simulator sends no request anywhere, so its jobs claim no slot and are not throttled.
    """
    section = ENDPOINT_RULES.get(rule)
    if section is None:
        return 0
    ep = _endpoint(cfg, section)
    return ep.concurrency if ep.backend != "sim" else 0


def evaluate_slots(cfg: Config, condition: str, arm: str, shard: int) -> int:
    """Slots an evaluation shard's job claims: its episodes run at most ``executor.concurrency`` at a time
    and each keeps one request in flight, so a shard of fewer episodes claims only those. Otherwise a
    one-episode shard would hold every slot of a server it can use one of, and jobs would queue behind it
    while the server idles. An empty shard still claims one: its job sets up the endpoint like any other."""
    slots = api_slots(cfg, "evaluate")
    if not slots:
        return 0
    return min(slots, max(1, _shard_episodes(cfg)[(condition, arm, shard)]))


_episodes: tuple[Config, dict[tuple[str, str, int], int]] | None = None


def _shard_episodes(cfg: Config) -> dict[tuple[str, str, int], int]:
    # The count builds the suite's instances: once for the workflow's configuration, not once per job the
    # scheduler creates (a process holds one configuration; another one recounts).
    global _episodes
    if _episodes is None or _episodes[0] is not cfg:
        from evoaudit.ops.plan import evaluate_shard_episodes

        _episodes = (cfg, evaluate_shard_episodes(cfg))
    return _episodes[1]


def check_api_budget(cfg: Config, global_resources: dict[str, Any]) -> None:
    """Refuse a ``--resources api_slots=N`` smaller than one job's concurrency.

    Snakemake silently lowers a job's claim to the global limit, which would let that job keep more
    requests in flight than the budget allows; stopping here keeps the cap honest.
    """
    limit = global_resources.get("api_slots")
    limit = getattr(limit, "value", limit)  # Snakemake wraps resource values in objects in newer versions
    if limit is None or not isinstance(limit, int | float):
        return
    for rule, section in ENDPOINT_RULES.items():
        need = api_slots(cfg, rule)
        if need > limit:
            raise ResourceError(
                f"--resources api_slots={limit} is below {section}.concurrency={need} (used by rule {rule}); "
                f"set {section}.concurrency to at most {int(limit)} in the config, or raise api_slots"
            )


def local_endpoint_rules(cfg: Config) -> bool:
    """Whether the endpoint-calling rules run on the submitting host (cluster.local_endpoint_rules)."""
    return cfg.cluster.local_endpoint_rules
