"""Which endpoints of a run are the behavioural simulator, and the notice every report opens with then.

On the simulator a method moves utility or attack success only through the cue table (``sim.cues``) and
the other ``sim`` parameters: its effects are mechanism checks of the audit, not measurements of a model.
"""

from __future__ import annotations

from evoaudit.config import SIM_MODEL_PREFIX, Config, EndpointConfig

__all__ = ["apex_sim_notice", "records_sim_notice", "sim_notice", "simulated_endpoints"]


def _is_sim(endpoint: EndpointConfig) -> bool:
    return endpoint.backend == "sim" or endpoint.model.startswith(SIM_MODEL_PREFIX)


def simulated_endpoints(cfg: Config) -> list[str]:
    """Config fields of the run's model endpoints that are the simulator, in a fixed order."""
    endpoints = {"executor": cfg.executor, "optimizer": cfg.optimizer}
    if cfg.transfer.enabled:
        endpoints["transfer.executor"] = cfg.transfer.executor
    return [name for name, ep in endpoints.items() if _is_sim(ep)]


def sim_notice(cfg: Config) -> str | None:
    """The sentence a report opens with when any endpoint is the simulator; None otherwise."""
    sims = simulated_endpoints(cfg)
    if not sims:
        return None
    cues = cfg.sim.cues.model_dump()
    active = sorted(name for name, strength in cues.items() if strength != 0)
    if not active:
        cue_state = "every cue at strength 0"
    elif len(active) == len(cues):
        cue_state = f"all {len(cues)} cues active"
    else:
        cue_state = f"cues active: {', '.join(active)}"
    cue_state += f"; memory_use {cfg.sim.memory_use:g}, memory_gain {cfg.sim.memory_gain:g}"
    return (
        f"Simulator run ({', '.join(sims)}: the embedded behavioural simulator). Method effects in this "
        f"report are mechanism checks set by sim.cues and the other sim parameters ({cue_state}), not "
        "measurements of a model."
    )


def apex_sim_notice(cfg: Config) -> str | None:
    """The sentence the APEX report opens with when any audited model is the simulator."""
    sims = [m.id for m in cfg.apex.models if _is_sim(m.executor)]
    if not sims:
        return None
    return (
        f"Simulator run (apex.models {', '.join(sims)}: the embedded behavioural simulator). Rates here are "
        "mechanism checks set by sim.apex and each model's overrides, not measurements of a model."
    )


def fingerprint_is_sim(executor: dict) -> bool:
    """Whether a rollout's endpoint fingerprint (``Rollout.executor``) is the simulator: an embedded
    backend (``sim``, ``sim-apex``) or an ``openai`` endpoint serving the simulator's model id."""
    models = [str(executor.get("model") or ""), *(str(m) for m in executor.get("served_models") or [])]
    return str(executor.get("backend", "")).startswith("sim") or any(
        m.startswith(SIM_MODEL_PREFIX) for m in models
    )


def records_sim_notice(executors: list[dict], cfg_notice: str | None = None) -> str | None:
    """The notice for an output made from rollout records: the configuration's notice where there is one,
    else a notice when any record's endpoint fingerprint is the simulator; None otherwise."""
    if cfg_notice:
        return cfg_notice
    sims = sorted({str(e.get("model") or e.get("backend")) for e in executors if fingerprint_is_sim(e)})
    if not sims:
        return None
    return (
        f"Simulator run (executor {', '.join(sims)}: the embedded behavioural simulator). Method effects in "
        "these records are mechanism checks set by the simulator's parameters and cues, not measurements "
        "of a model."
    )
