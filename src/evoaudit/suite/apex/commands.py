"""``evoaudit apex tasks|build|serve|attacks``: the command-line side of the APEX-Harm workspaces;
``served_instance`` and ``resolve_attack_id`` also give ``evoaudit apex score`` the instance and attack a
record names. The command line reaches them as ``ApexCommands`` through ``suite.commands``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoaudit.errors import AuditError
from evoaudit.suite.apex.attacks.attack_set import build_from_config
from evoaudit.suite.apex.base.workspace import Settings
from evoaudit.suite.apex.build import build_all
from evoaudit.suite.apex.runtime.isolation import settings_fields
from evoaudit.suite.apex.worlds.cache import load_workspace
from evoaudit.suite.apex.worlds.generate import TASK_IDS, TASKS

if TYPE_CHECKING:
    from evoaudit.config import ApexConfig, Config


def settings_from(apex_cfg: ApexConfig) -> Settings:
    return Settings(**settings_fields(apex_cfg))


def apex_build(
    apex_cfg: ApexConfig, out: str | None = None, tasks: list[str] | None = None, rebuild: bool = False
) -> list[dict]:
    unknown = sorted(set(tasks or ()) - set(TASK_IDS))
    if unknown:
        raise AuditError(f"--task: unknown APEX task(s) {unknown}; known: {', '.join(TASK_IDS)}")
    manifests = []
    for variant in apex_cfg.variants:
        target = Path(out or apex_cfg.out) / variant
        manifests.append(
            build_all(target, variant, apex_cfg.seed, apex_cfg.scale, tuple(tasks or TASK_IDS), rebuild)
        )
        print(
            json.dumps(
                {
                    "out": target.as_posix(),
                    "tasks": len(manifests[-1]["tasks"]),
                    "files": [t["n_files"] for t in manifests[-1]["tasks"]],
                    "line_shapes": manifests[-1]["world_text"]["line_shapes"]["n_shapes_all"],
                }
            )
        )
    return manifests


def apex_serve(
    apex_cfg: ApexConfig,
    task: str,
    variant: str,
    transport: str,
    app: str,
    port: int,
    record: str | None,
    ready_file: str | None,
    out: str | None = None,
    attack: str | None = None,
    cfg: Config | None = None,
) -> None:
    """Serve one task's world: as built (``attack`` None: the clean world, calls appended to ``record`` as
    JSON lines), or with the attack ``attack`` of the built attack set in place, episode by episode
    (``attacked_host``; ``cfg`` is the full configuration)."""
    from evoaudit.suite.apex.runtime import mcp_server

    if out is not None:
        apex_cfg = apex_cfg.model_copy(update={"out": out})
    episodes = None
    if attack is None:
        root = Path(apex_cfg.out) / variant
        if not (root / "tasks" / f"{task}.{variant}.json").exists():
            raise AuditError(f"{root}: no built task {task}.{variant}; run `evoaudit apex build` first")
        ws, task_record = load_workspace(root, task, variant)
        ws.settings = settings_from(apex_cfg)
        prompt = task_record.prompt
    else:
        if cfg is None:
            raise ValueError("apex_serve: an attacked workspace needs the full configuration (cfg)")
        full = cfg.model_copy(update={"suite": cfg.suite.model_copy(update={"apex": apex_cfg})})
        episodes = attacked_host(full, task, variant, attack, record)
        ws, prompt = episodes.ws, episodes.prompt
    if transport == "stdio":
        mcp_server.serve_stdio(ws, app, record, prompt, episodes)
    else:
        import anyio

        anyio.run(lambda: mcp_server.serve_http(ws, "127.0.0.1", port, record, ready_file, prompt, episodes))


def served_instance(cfg: Config, task: str, variant: str) -> tuple[Any, Any]:
    """(the suite object, the instance of ``task``) as the workflow builds them (``ApexSuite``), for the
    built worlds of ``cfg``; attacks exist only on the endpoint variant (``suite.apex.variants[0]``)."""
    from evoaudit.config import suite_view
    from evoaudit.suite.apex.adapter import ApexSuite

    apex = cfg.suite.apex
    endpoint = apex.variants[0]
    if variant != endpoint:
        raise AuditError(
            f"--variant {variant}: the attack set is built on the endpoint variant {endpoint} "
            "(suite.apex.variants[0]); serve that variant, or leave out --attack"
        )
    if task not in TASK_IDS:
        raise AuditError(f"{task}: not an APEX task; known: {', '.join(TASK_IDS)}")
    one = cfg.model_copy(
        update={
            "apex": cfg.apex.model_copy(update={"tasks": (task,)}),
            "suite": cfg.suite.model_copy(update={"apex": apex.model_copy(update={"variants": (endpoint,)})}),
        }
    )
    suite = ApexSuite()
    (instance,) = suite.build_instances(suite_view(one))
    return suite, instance


def resolve_attack_id(suite: Any, instance: Any, attack: str) -> None:
    """Refuse an attack id the built set does not hold, naming the file and the nearest ids."""
    import difflib

    from evoaudit.suite.apex.environment import instance_attack_set, template

    ref = template(instance)
    found = instance_attack_set(ref)
    if attack in found and found[attack].task_id == instance.family:
        return
    own = sorted(a for a, inst in found.items() if inst.task_id == instance.family)
    if not found:
        raise AuditError(
            f"{ref['attack_set']}: no attack set built (--attack {attack}); build it with `evoaudit apex "
            "attacks` (or the apex_attacks rule) for these worlds"
        )
    near = difflib.get_close_matches(attack, own, n=5, cutoff=0.0) or own[:5]
    raise AuditError(
        f"{ref['attack_set']}: no attack {attack!r} for task {instance.family}; nearest ids: "
        f"{', '.join(near) or '(none for this task)'} ({len(own)} for this task)"
    )


def attacked_host(cfg: Config, task: str, variant: str, attack: str, record: str | None) -> Any:
    """The ``mcp_server.EpisodeHost`` of an attacked episode: the world, prompt and watcher exactly as the
    workflow's episode has them (``ApexSuite.build_environment``, ``prompt_for``, ``open_tools``'s
    settings)."""
    import dataclasses

    from evoaudit.suite.apex.runtime.isolation import settings_fields
    from evoaudit.suite.apex.runtime.mcp_server import EpisodeHost

    suite, instance = served_instance(cfg, task, variant)
    resolve_attack_id(suite, instance, attack)
    env = suite.build_environment(instance, attack, suite.injections(cfg.suite, instance, attack))
    env.settings = dataclasses.replace(env.settings, **settings_fields(cfg.suite.apex))
    return EpisodeHost(
        env,
        suite.prompt_for(instance, attack),
        instance_id=instance.instance_id,
        task_id=task,
        variant=variant,
        attack=attack,
        record_path=record,
    )


class ApexCommands:
    """APEX-Harm's command-line actions (``suite.commands.SuiteCommands``)."""

    build = staticmethod(apex_build)
    serve = staticmethod(apex_serve)
    served_instance = staticmethod(served_instance)
    resolve_attack_id = staticmethod(resolve_attack_id)

    def tasks(self) -> list[tuple[str, str, str]]:
        return [(task_id, domain, difficulty) for task_id, domain, difficulty, _ in TASKS]

    def build_attacks(self, cfg: Config, attacker: Any, out: Path | None) -> tuple[Path, str]:
        return build_from_config(cfg, attacker, out)
