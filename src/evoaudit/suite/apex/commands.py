"""``evoaudit apex build|serve``: the command-line side of the APEX-Harm workspaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evoaudit.errors import AuditError
from evoaudit.suite.apex.build import build_all, load_workspace
from evoaudit.suite.apex.generate import TASK_IDS
from evoaudit.suite.apex.isolation import settings_fields
from evoaudit.suite.apex.workspace import Settings


def settings_from(apex_cfg: Any) -> Settings:
    return Settings(**settings_fields(apex_cfg))


def apex_build(
    apex_cfg: Any, out: str | None = None, tasks: list[str] | None = None, rebuild: bool = False
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
                }
            )
        )
    return manifests


def apex_serve(
    apex_cfg: Any,
    task: str,
    variant: str,
    transport: str,
    app: str,
    port: int,
    record: str | None,
    ready_file: str | None,
    out: str | None = None,
) -> None:
    root = Path(out or apex_cfg.out) / variant
    if not (root / "tasks" / f"{task}.{variant}.json").exists():
        raise AuditError(f"{root}: no built task {task}.{variant}; run `evoaudit apex build` first")
    ws, record_ = load_workspace(root, task, variant)
    ws.settings = settings_from(apex_cfg)
    from evoaudit.suite.apex import mcp_server

    if transport == "stdio":
        mcp_server.serve_stdio(ws, app, record)
    else:
        import anyio

        anyio.run(lambda: mcp_server.serve_http(ws, "127.0.0.1", port, record, ready_file))
