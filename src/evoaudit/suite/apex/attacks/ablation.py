"""APEX-Harm ablations (``apex.ablations``): the ablated arm's attack options and its attack set.

An ablation is the main attack set rebuilt on the same frozen worlds with some ``suite.apex.attacks``
switches changed (the APEX-Harm paper's §4.3 and appendices H.6, H.8, I). Its attacked episodes run through
the same workflow rules as the main run (an ``arm`` wildcard selects ``ablations/<name>/``); the main run is
the base arm it is compared with (``report.apex.ablation``).

The existing-file placement baselines (Table 6) put the injection into a file the benign run actually read.
The source file is normally chosen by the attacker from the prompt alone; for these arms the choice is
restricted to the files the reference model's benign episode of that task read (the attacker's own pick when
it is among them, else the first file read), so this attack set is built after the benign runs and from
their records. A task whose benign episode read none of its files keeps the attacker's pick, and the attack
set's provenance lists which tasks did.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evoaudit.config import ApexAblationConfig, ApexAttacksConfig, Config, ConfigError
from evoaudit.paths import ABLATIONS
from evoaudit.records import Rollout

READ_TOOLS = ("read_file", "read_docx", "read_sheet", "read_pdf")
PREFIX = f"{ABLATIONS}/"  # an ablated arm's directories (evoaudit.paths.Layout.ablation_arm)


def ablation(cfg: Config, name: str) -> ApexAblationConfig:
    for a in cfg.apex.ablations:
        if a.name == name:
            return a
    raise ConfigError(
        f"apex.ablations: no ablation named {name!r} (have {[a.name for a in cfg.apex.ablations]})"
    )


def arm_name(arm: str) -> str | None:
    """The ablation an ``arm`` wildcard value names (``ablations/<name>/``), or None for the base arm."""
    if not arm:
        return None
    if not (arm.startswith(PREFIX) and arm.endswith("/")):
        raise ValueError(f"arm {arm!r}: expected '' or 'ablations/<name>/'")
    return arm[len(PREFIX) : -1]


def attack_options(cfg: Config, name: str) -> ApexAttacksConfig:
    """``suite.apex.attacks`` with the ablation's changes, validated as that section is."""
    a = ablation(cfg, name)
    merged = {**cfg.suite.apex.attacks.model_dump(), **a.attacks}
    try:
        return ApexAttacksConfig.model_validate(merged)
    except Exception as exc:  # pydantic's message names the key; say where it came from
        raise ConfigError(f"apex.ablations ({name}).attacks: {exc}") from exc


def categories(cfg: Config, name: str) -> tuple[str, ...]:
    return ablation(cfg, name).categories or tuple(cfg.apex.categories)


def own_attack_set(cfg: Config, name: str) -> bool:
    """Whether the arm builds its own attack set; one that changes no attack switch runs the main set, so
    both arms attack the same instances (an orchestrator ablation, e.g. the timer)."""
    return bool(ablation(cfg, name).attacks)


def runs_benign(cfg: Config, name: str) -> bool:
    """Whether the arm runs benign episodes too: an orchestrator change can move the unattacked task score."""
    return bool(ablation(cfg, name).orchestrator)


def reference_model(cfg: Config, name: str) -> str:
    return ablation(cfg, name).reference_model or cfg.apex.models[0].id


def needs_benign(cfg: Config, name: str) -> bool:
    """Whether the arm's attack set is chosen from benign runs (existing-file placement)."""
    return attack_options(cfg, name).placement != "created"


def _norm(path: str) -> str:
    return path.strip().removeprefix("./").lstrip("/")


def read_files(rollouts: Iterable[Rollout]) -> dict[str, list[str]]:
    """Per user prompt, the files the episode read, in first-read order (repeat r0 when there are several)."""
    out: dict[str, list[str]] = {}
    for r in sorted(rollouts, key=lambda r: r.rollout_id):
        if r.goal is not None or r.lineage != "r0":
            continue
        prompt = next((m.content for m in r.messages if m.role == "user"), None)
        if not isinstance(prompt, str):
            continue
        seen: list[str] = []
        for c in r.calls:
            path = (c.args or {}).get("path") if c.function in READ_TOOLS else None
            if isinstance(path, str) and _norm(path) not in seen:
                seen.append(_norm(path))
        out[prompt] = seen
    return out


class ReadFileAttacker:
    """An attacker whose source-file choice is limited to files the benign episode read."""

    def __init__(self, inner: Any, read: dict[str, list[str]]) -> None:
        self._inner = inner
        self._read = read
        self.choices: dict[str, dict[str, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def select_source(self, prompt: str, keywords: list[str], files: list[str]) -> tuple[str, str]:
        pick, h = self._inner.select_source(prompt, keywords, files)
        read = [f for f in self._read.get(prompt, []) if f in files]
        chosen = pick if (pick in read or not read) else read[0]
        self.choices[prompt[:80]] = {"attacker_pick": pick, "chosen": chosen, "benign_read": read}
        return chosen, h


def build(cfg: Config, name: str, attacker: Any, out: Path, benign: Iterable[Rollout] = ()) -> dict[str, Any]:
    """Build the ablated arm's attack set at ``out``; returns what its provenance records."""
    from evoaudit.suite.apex.attacks.attack_set import AttackOptions, build_attack_set
    from evoaudit.suite.apex.worlds.generate import build_task, selected_task_ids

    apex = cfg.suite.apex
    options = attack_options(cfg, name)
    chosen = selected_task_ids(cfg.apex.tasks)
    tasks = [build_task(t, apex.variants[0], apex.seed, apex.scale) for t in chosen]
    chooser = attacker
    if options.placement != "created":
        chooser = ReadFileAttacker(attacker, read_files(benign))
    sha = build_attack_set(out, tasks, chooser, AttackOptions(**options.model_dump()), apex.seed)
    info: dict[str, Any] = {"ablation": name, "options": options.model_dump(), "attack_set_sha256": sha}
    if isinstance(chooser, ReadFileAttacker):
        info["reference_model"] = reference_model(cfg, name)
        info["source_choices"] = chooser.choices
        info["tasks_without_benign_read"] = sorted(
            k for k, v in chooser.choices.items() if not v["benign_read"]
        )
    return info
