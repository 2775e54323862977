"""The configuration of the cross-executor transfer check: which lineages and conditions it runs, and the
derived configuration its evaluation jobs run under (the audit's, with the second executor and the goal
and variant subset). The workflow's rules, the stage scripts, the CLI and the report ask this module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evoaudit import atomic
from evoaudit import config as config_mod
from evoaudit.config import Config, ConfigError
from evoaudit.credentials import public_config

SOURCE = "transfer (derived from the audit configuration)"


def active_conditions(cfg: Config) -> list[str]:
    return [c for c in cfg.transfer.conditions if c in cfg.conditions]


def transfer_lineages(cfg: Config) -> list[str]:
    return list(cfg.transfer.lineages) if cfg.transfer.lineages is not None else list(cfg.lineages)


def derive_config(cfg: Config) -> dict[str, Any]:
    """The configuration of the transfer evaluation: the audit's, with the second executor and the subset."""
    return _derive(cfg)[0]


def _derive(cfg: Config) -> tuple[dict[str, Any], Config]:
    """The transfer evaluation's configuration as data and as the validated ``Config`` (validated once:
    every derived value must still pass the schema)."""
    t = cfg.transfer
    bad_variants = sorted(set(t.variants) - set(cfg.roles.attacked_endpoint))
    if bad_variants:
        raise ConfigError(
            f"config: transfer.variants: {bad_variants} are not attacked endpoint variants "
            f"(roles.attacked_endpoint = {list(cfg.roles.attacked_endpoint)}); pick from those"
        )
    bad_lineages = sorted(set(transfer_lineages(cfg)) - set(cfg.lineages))
    if bad_lineages:
        raise ConfigError(
            f"config: transfer.lineages: {bad_lineages} are not in lineages {list(cfg.lineages)}"
        )
    unknown = sorted(set(t.sim) - set(cfg.sim.model_dump()))
    if unknown:
        raise ConfigError(
            f"config: transfer.sim: unknown simulator parameters {unknown}; "
            f"allowed: {sorted(cfg.sim.model_dump())}"
        )
    data = cfg.model_dump(mode="json")
    data["executor"] = t.executor.model_dump(mode="json")
    data["sim"] = {**data["sim"], **t.sim}
    data["suite"]["goals"] = list(t.goals)
    data["roles"]["attacked_endpoint"] = list(t.variants)
    data["lineages"] = transfer_lineages(cfg)
    data["conditions"] = active_conditions(cfg) or [cfg.conditions[0]]
    data["evaluation"]["shards"] = 1
    data["transfer"]["enabled"] = False  # the derived run does not nest another transfer
    return data, config_mod.from_dict(data, SOURCE)


def evaluation_config(cfg: Config, recorded: Path) -> Config:
    """The configuration a transfer job runs under: derived again from the audit's own configuration,
    because the recorded copy (``recorded``, written by the transfer_config rule) has URL credentials
    redacted. The two must agree apart from those, so the record says what ran."""
    derived, validated = _derive(cfg)
    try:
        on_file = json.loads(recorded.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{recorded}: unreadable transfer configuration ({exc}); rerun snakemake") from exc
    public = public_config(derived)
    if on_file != public:
        differ = sorted(k for k in set(on_file) | set(public) if on_file.get(k) != public.get(k))
        raise ConfigError(
            f"{recorded}: differs from the transfer configuration derived from the audit's configuration "
            f"in {differ}; it is a record, not an input: delete it and rerun snakemake to write it again"
        )
    return validated


def write_transfer_config(cfg: Config, out: Path) -> dict:
    """The configuration the cross-executor check evaluates under (second executor, goal subset), as a
    record with URL credentials redacted; the transfer job derives it again from the user's configuration
    (``evaluation_config``). Returns what was written."""
    public = public_config(derive_config(cfg))
    atomic.write_text(out, json.dumps(public, indent=2, sort_keys=True) + "\n")
    return public
