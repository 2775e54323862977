"""Configurations derived from a validated one: an APEX-Harm ablation arm's or model's, one without the
response cache, and ``stage_config``, the one answer to which configuration a stage depends on (rerun
triggers, resume keys, provenance)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from evoaudit.config.checks import _role_blocks, from_dict
from evoaudit.config.errors import ConfigError
from evoaudit.config.model import Config, SimApexConfig
from evoaudit.credentials import public_config
from evoaudit.hashing import sha256_json


def apex_arm_config(cfg: Config, ablation: str | None) -> Config:
    """The configuration an APEX arm's episodes run under: the main run's (``ablation`` None), or with the
    ablation's orchestrator settings (``apex.ablations[].orchestrator``) in place of ``apex``'s."""
    if ablation is None:
        return cfg
    found = [a for a in cfg.apex.ablations if a.name == ablation]
    if not found:
        raise ConfigError(
            f"apex.ablations: no ablation named {ablation!r} (have {[a.name for a in cfg.apex.ablations]})"
        )
    if not found[0].orchestrator:
        return cfg
    return cfg.model_copy(update={"apex": cfg.apex.model_copy(update=found[0].orchestrator)})


def apex_model_config(cfg: Config, model_id: str) -> Config:
    """The configuration one APEX model's episodes run under: its executor in place of ``executor``, its
    simulator overrides merged into ``sim.apex``, and ``apex.step_limit``, ``apex.system_prompt`` and
    ``apex.episode_timer_s`` as the agent's."""
    m = cfg.apex.model(model_id)
    sim_apex = cfg.sim.apex.model_dump(mode="json")
    for key, value in m.sim.items():
        sim_apex[key] = {**sim_apex[key], **value} if isinstance(value, dict) else value
    sim = cfg.sim.model_copy(update={"apex": SimApexConfig.model_validate(sim_apex)})
    return cfg.model_copy(
        update={
            "executor": m.executor,
            "sim": sim,
            "agent": cfg.agent.model_copy(
                update={
                    "max_steps": cfg.apex.step_limit,
                    "system_prompt": cfg.apex.system_prompt,
                    "time_limit_s": cfg.apex.episode_timer_s,
                }
            ),
        }
    )


# Executor settings that change how requests travel, never what is asked or answered: an episode's
# resume key leaves them out, so a rerun at another concurrency or without the cache keeps its rollouts.
OPERATIONAL_FIELDS = frozenset(
    {
        "concurrency",
        "cache",
        "cache_path",
        "timeout_s",
        "max_retries",
        "retry_backoff_s",
        "retry_backoff_max_s",
        "transport",
        "keepalive_expiry_s",
    }
)


# The Banking stages' configuration sections (``suite`` without its ``apex`` worlds, so that resizing or
# reseeding the APEX worlds reruns nothing of the Banking audit).
_BANKING_SECTIONS: dict[str, tuple[str, ...]] = {
    "suite": ("suite", "roles"),
    "acquire": ("seed", "suite", "roles", "agent", "executor", "sim"),
    "evolve": ("seed", "optimizer", "sim", "agent", "methods_params", "roles", "suite", "executor"),
    "evaluate": ("seed", "suite", "roles", "agent", "executor", "sim", "evaluation", "methods_params"),
    "report": ("seed", "conditions", "lineages", "evaluation", "report", "transfer", "qualitative"),
}


def _episode(cfg: Config, dumped: dict[str, Any], **_: Any) -> dict[str, Any]:
    executor = {k: v for k, v in dumped["executor"].items() if k not in OPERATIONAL_FIELDS}
    return {k: dumped[k] for k in ("seed", "agent", "suite", "sim")} | {"executor": executor}


def _apex_runs(
    cfg: Config, dumped: dict[str, Any], model: str | None = None, ablation: str | None = None, **_: Any
) -> dict[str, Any]:
    # A model's runs depend only on its own entry and on what shapes an episode: adding a model or a
    # category, or changing the judge or the report's failure policy, reruns none of them.
    apex = apex_arm_config(cfg, ablation).apex.model_dump(mode="json")
    if model is not None:
        # The timer is absent from the dump when unset, so untimed runs hash as before it existed.
        keep = ("repeats", "step_limit", "system_prompt", "shards", "episode_timer_s")
        own = [m for m in apex["models"] if m["id"] == model]
        apex = {k: apex[k] for k in keep if k in apex} | {"model": own}
    return {
        "seed": cfg.seed,
        "apex": apex,
        "suite_apex": cfg.suite.apex.model_dump(mode="json"),
        "sim_apex": cfg.sim.apex.model_dump(mode="json"),
    }


def _apex_attacks(
    cfg: Config, dumped: dict[str, Any], ablation: str | None = None, **_: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"seed": cfg.seed, "suite_apex": cfg.suite.apex.model_dump(mode="json")}
    if ablation is not None:
        found = [a for a in cfg.apex.ablations if a.name == ablation]
        if not found:
            raise ConfigError(
                f"apex.ablations: no ablation named {ablation!r} "
                f"(have {[a.name for a in cfg.apex.ablations]})"
            )
        body["ablation"] = found[0].model_dump(mode="json")
    return body


def _apex_worlds(cfg: Config, dumped: dict[str, Any], **_: Any) -> dict[str, Any]:
    suite_apex = cfg.suite.apex.model_dump(mode="json")
    return {k: suite_apex[k] for k in ("scale", "seed", "variants", "out")}


# What each stage's outputs depend on, beside the Banking stages' sections. Each body is exactly what the
# workflow hashed before ``stage_config`` existed, so an existing results directory does not rerun.
_STAGE_BODIES: dict[str, Callable[..., dict[str, Any]]] = {
    "episode": _episode,
    "apex": _apex_runs,
    "apex_attacks": _apex_attacks,
    "apex_judge": lambda cfg, dumped, **_: {
        "seed": cfg.seed,
        "judge": cfg.apex.judge.model_dump(mode="json"),
    },
    "apex_probes": lambda cfg, dumped, **_: cfg.suite.apex.model_dump(mode="json"),
    "apex_worlds": _apex_worlds,
    "config": lambda cfg, dumped, **_: (
        cfg.model_dump(mode="json")
        | (
            {"write_defenses": cfg.write_defenses.model_dump(mode="json")}
            if cfg.write_defenses.screens
            else {}
        )
    ),
    # The write screens (rule write_screen): what they match and the optimizer endpoint the judge asks.
    "write_screen": lambda cfg, dumped, **_: (
        {k: dumped[k] for k in ("seed", "optimizer", "sim")}
        | {"suite": {"name": cfg.suite.name}}  # the judge prompt's assistant role; the instances are an input
        | {"methods_params": {"max_attempts": cfg.methods_params.max_attempts}}
        | {"write_defenses": cfg.write_defenses.in_force()}
    ),
    # The poisoning extension's own rules (contamination, persistence): its section, left out of the
    # others', and the simulator's planted copying.
    "poisoning": lambda cfg, dumped, **_: {
        "seed": cfg.seed,
        "poisoning": cfg.poisoning.model_dump(mode="json"),
        "poison_copy": dict(cfg.sim.poison_copy),
    },
}


def _planted_poisoning(cfg: Config, stage: str) -> dict[str, Any]:
    """The simulator's planted poisoning rates (docs/poisoning.md) that ``stage``'s model requests read:
    copying shapes the optimizer's answers (evolution), the sleeper the agent's episodes. Left out of
    model_dump, so a run without them keeps every hash; added here only when set, so that changing one
    reruns what it changes (a poisoned lineage's goal and share are in its name)."""
    planted: dict[str, Any] = {}
    if stage == "evolve" and any(cfg.sim.poison_copy.values()):
        planted["poison_copy"] = dict(sorted(cfg.sim.poison_copy.items()))
    if stage in ("acquire", "evaluate", "episode") and cfg.sim.poison_sleeper:
        planted["poison_sleeper"] = cfg.sim.poison_sleeper
    return planted


def _defense_params(cfg: Config, defense: str) -> dict[str, Any]:
    """The parameters of ``defense`` (``defense_params``) where its defended shards' hash must see them:
    only a defence that has any (llm_monitor's threshold calibration); nothing for the others, so their
    hashes are the undefended shard's."""
    params = getattr(cfg.defense_params, defense, None)
    return {"defense_params": {defense: params.model_dump(mode="json")}} if params is not None else {}


def _write_defenses(cfg: Config) -> dict[str, Any]:
    """The write defences where a hash must see them: nothing while they are off (the default run's hashes
    are as they were before the extension existed), else the screens and the enabled screens' settings
    (an unused judge threshold reruns nothing)."""
    if not cfg.write_defenses.screens:
        return {}
    return {"write_defenses": cfg.write_defenses.in_force()}


#: Every stage ``stage_config`` answers for.
STAGES = (*_BANKING_SECTIONS, *_STAGE_BODIES)


def stage_config(
    cfg: Config,
    stage: str,
    *,
    model: str | None = None,
    ablation: str | None = None,
    defense: str | None = None,
) -> dict[str, Any]:
    """The configuration content ``stage``'s outputs depend on, URL credentials redacted: the one answer
    to that question. The workflow's rerun triggers (``get_stage_params``), a rollout's resume key
    (``episode``) and the provenance every output and seal event records (``config``) all hash it, so a
    change outside it reruns nothing of ``stage``.

    Stages: ``suite``, ``acquire``, ``evolve``, ``evaluate``, ``report`` (the Banking audit's rules);
    ``episode`` (what one episode depends on: seed, agent, suite, simulator, the executor's request-shaping
    settings); ``apex`` (every APEX run, or one ``model``'s), ``apex_attacks`` (the main attack set, or one
    ``ablation``'s), ``apex_judge``, ``apex_probes``, ``apex_worlds``; ``write_screen`` (the write-path
    screens); ``config`` (the whole hashed configuration)."""
    dumped = cfg.model_dump(mode="json")
    dumped["suite"] = cfg.suite.model_dump(mode="json", exclude={"apex"})
    dumped["sim"] |= _planted_poisoning(cfg, stage)
    if stage in _BANKING_SECTIONS:
        body = {k: dumped[k] for k in _BANKING_SECTIONS[stage]}
        if stage == "evolve":  # evolution learns from the screened record when a write screen is on
            body |= _write_defenses(cfg)
        if stage == "evaluate" and defense is not None:  # a defended shard: its defence's own parameters
            body |= _defense_params(cfg, defense)
    elif stage in _STAGE_BODIES:
        body = _STAGE_BODIES[stage](cfg, dumped, model=model, ablation=ablation)
    else:
        raise ValueError(f"stage_config: unknown stage {stage!r}; one of {', '.join(STAGES)}")
    # A hash of a URL's password in a params digest or a record could be checked against guesses offline.
    return public_config(body)


def stage_digest(
    cfg: Config,
    stage: str,
    *,
    model: str | None = None,
    ablation: str | None = None,
    defense: str | None = None,
) -> str:
    """sha256 of ``stage_config`` (canonical JSON): a rule's rerun trigger (its first 16 hex digits) and
    the configuration part of an episode's resume key."""
    return sha256_json(stage_config(cfg, stage, model=model, ablation=ablation, defense=defense))


def without_cache(cfg: Config) -> Config:
    """``cfg`` with the response cache off for every role that calls a model (``evoaudit --no-cache``)."""
    raw = cfg.full_dump()
    for _, parent, key in _role_blocks(raw):
        parent[key]["cache"] = False
    return from_dict(raw)


def config_sha256(cfg: Config) -> str:
    """The configuration hash every ``provenance.json`` records (``stage_config(cfg, "config")``, URL
    credentials redacted: a hash of a password could be checked against guesses offline)."""
    # ASCII-escaped JSON, not hashing.canonical_json: the hash every recorded provenance already carries.
    blob = json.dumps(stage_config(cfg, "config"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
