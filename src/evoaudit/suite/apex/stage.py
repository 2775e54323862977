"""The APEX worlds stage (workflow rule ``apex_worlds``): build the configured variants' worlds and pin them;
and the attack set's stealth check (rule ``apex_stealth``, ``attack_set_stealth``).

Worlds are built (or reused from the cache, see ``build.py``) under ``<suite.apex.out>/<variant>/``. Two files
go to ``suite.apex.out`` itself:

- ``apex_manifest.json``: the per-variant build manifests (file counts, sha256s, self-check results, line
  shapes and stealth AUC per vector under ``world_text``);
- ``apex_spec.json``: what later APEX stages pin, as the Banking suite spec does: generator version, scale,
  seed, variants, task ids and, per variant and task, the world, task-record, task-files and plan sha256s,
  with ``sha256`` over all of it.

Nothing here is read by a Banking stage; the Banking audit's outputs do not depend on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoaudit import atomic
from evoaudit.hashing import sha256_json
from evoaudit.provenance import write_provenance
from evoaudit.records import AttackStealth
from evoaudit.suite.apex.attacks import attack_set as attacks
from evoaudit.suite.apex.attacks import stealth
from evoaudit.suite.apex.build import build_all
from evoaudit.suite.apex.worlds.cache import GENERATOR_VERSION, load_workspace
from evoaudit.suite.apex.worlds.generate import selected_task_ids

if TYPE_CHECKING:
    from evoaudit.config import ApexConfig, Config

_PINNED = ("world_id", "world_sha256", "task_sha256", "task_files_sha256", "plan_sha256")


def spec_of(
    apex_cfg: ApexConfig, manifests: dict[str, dict[str, Any]], task_ids: tuple[str, ...]
) -> dict[str, Any]:
    worlds = {
        variant: {e["task_id"]: {k: e[k] for k in _PINNED} for e in manifest["tasks"]}
        for variant, manifest in manifests.items()
    }
    body = {
        "suite": "apex",
        "generator_version": GENERATOR_VERSION,
        "scale": apex_cfg.scale,
        "seed": apex_cfg.seed,
        "variants": list(apex_cfg.variants),
        "task_ids": list(task_ids),
        "worlds": worlds,
    }
    return {**body, "sha256": sha256_json(body)}


def build_worlds(cfg: Config, manifest_path: str | Path, spec_path: str | Path) -> dict[str, Any]:
    """Build (or reuse) the worlds of every configured variant; write the manifest and the spec."""
    apex = cfg.suite.apex
    task_ids = selected_task_ids(cfg.apex.tasks)
    manifests = {
        variant: build_all(Path(apex.out) / variant, variant, apex.seed, apex.scale, task_ids)
        for variant in apex.variants
    }
    spec = spec_of(apex, manifests, task_ids)
    atomic.write_text(Path(manifest_path), json.dumps(manifests, indent=2, sort_keys=True) + "\n")
    atomic.write_text(Path(spec_path), json.dumps(spec, indent=2, sort_keys=True) + "\n")
    write_provenance(
        [Path(manifest_path), Path(spec_path)], cfg, "apex_worlds", apex_spec_sha256=spec["sha256"]
    )
    return spec


def attack_set_stealth(cfg: Config, attacks_path: str | Path, spec_path: str | Path) -> AttackStealth:
    """The stealth check (``attacks.stealth``) on the frozen attack set at ``attacks_path``, whichever
    attacker wrote it, against the benign items of the endpoint variant's built worlds (pinned by the spec at
    ``spec_path``). The world build measures the simulated attacker's default set; this measures the set the
    run uses, so a model attacker's notes are measured too."""
    apex = cfg.suite.apex
    variant = apex.variants[0]
    instances = attacks.load_attack_set(attacks_path)
    doc = json.loads(Path(attacks_path).read_bytes())
    root = Path(apex.out) / variant
    chosen = selected_task_ids(cfg.apex.tasks)
    items = [stealth.world_items(load_workspace(root, t, variant)[0]) for t in chosen]
    report = stealth.vector_stealth(instances, items, apex.seed)
    return AttackStealth(
        attacker_model=doc["attacker"]["model"],
        sim_note_version=doc["attacker"].get("sim_note_version"),
        attack_set_sha256=attacks.pinned_sha256(attacks_path),
        worlds_spec_sha256=json.loads(Path(spec_path).read_text())["sha256"],
        variant=variant,
        vectors=[{"vector": v, **r} for v, r in report.items()],
    )
