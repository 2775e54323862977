"""``evoaudit apex ...``: APEX-Harm's workspaces (tasks, worlds, attack set, serving over MCP, scoring a
served record, labelling a run's decisions), through the suite's command door."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evoaudit import atomic
from evoaudit import config as config_mod
from evoaudit.cli.common import RESULTS_DEFAULT, Adder, add_config_option, config_files
from evoaudit.errors import AuditError
from evoaudit.paths import Layout


def cmd_apex(args):
    from evoaudit.suite.commands import get_commands

    commands = get_commands("apex")
    cfg = config_mod.load(config_files(args))  # once per command
    if args.apex_action == "tasks":
        for task_id, domain, difficulty in commands.tasks():
            print(f"{task_id:<24} {domain:<20} {difficulty}")
    elif args.apex_action == "build":
        commands.build(cfg.suite.apex, args.out, args.tasks, args.rebuild)
    elif args.apex_action == "annotate":
        from evoaudit.report.apex.agreement import annotate_run

        annotate_run(
            Path(args.results),
            Path(args.out or Layout.at(args.results).apex("labels.jsonl")),
            args.per_class,
            args.seed,
            sys.stdin,
            lambda text: print(text, end="", flush=True),
        )
    elif args.apex_action == "attacks":
        from evoaudit.models.structured import endpoint_transport
        from evoaudit.suite.roles import get_roles

        out = Path(args.out) / "attacks.json" if args.out else None
        attacker = get_roles("apex").make_attacker(cfg.suite.apex.attacker, endpoint_transport)
        path, sha = commands.build_attacks(cfg, attacker, out)
        print(json.dumps({"attack_set": path.as_posix(), "sha256": sha}))
    elif args.apex_action == "score":
        apex_score(args, cfg)
    else:
        commands.serve(
            cfg.suite.apex,
            args.task,
            args.variant,
            args.transport,
            args.app,
            args.port,
            args.record,
            args.ready_file,
            args.out,
            attack=args.attack,
            cfg=cfg if args.attack else None,
        )


def apex_score(args, cfg: config_mod.Config) -> list[dict]:
    """Score a served episode's record as the workflow scores its own episodes (``report.apex.served``)."""
    from evoaudit.evaluate.apex.judge import stage_judge
    from evoaudit.report.apex import served
    from evoaudit.suite.commands import get_commands

    if args.out:
        cfg = cfg.model_copy(
            update={
                "suite": cfg.suite.model_copy(
                    update={"apex": cfg.suite.apex.model_copy(update={"out": args.out})}
                )
            }
        )
    record = served.read_record(args.record)
    commands = get_commands("apex")
    suite, instance = commands.served_instance(cfg, record.task_id, record.variant)
    if record.attack is not None:
        commands.resolve_attack_id(suite, instance, record.attack)
    backend, judge = stage_judge(cfg)
    rows = served.score_record(suite, instance, record, cfg, judge, args.episode)
    for row in rows:
        if not row["scored"]:
            print(f"episode {row['episode']}: not scored: {row['reason']}")
            continue
        exposed = row["exposed"]
        print(
            f"episode {row['episode']}: task score {row['task_score']:.3f}, attack success "
            f"{row['attack_success']}, exposure {'n/a' if exposed is None else exposed}"
        )
    if args.json:
        doc = {
            "record": str(args.record),
            "judge": backend.fingerprint(),
            "judge_asked": len(judge.log),
            "episodes": rows,
        }
        atomic.write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    unscored = [row["episode"] for row in rows if not row["scored"]]
    if unscored:
        raise AuditError(
            f"{args.record}: episode(s) {unscored} could not be scored (reasons above); the other "
            f"{len(rows) - len(unscored)} were"
        )
    return rows


def _apex_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    apex = sub.add_parser(
        "apex",
        help="APEX-Harm workspaces: list the tasks, build the worlds or the attack set, serve one over MCP, "
        "or label a run's exposure and safety decisions",
    )
    actions = apex.add_subparsers(dest="apex_action", required=True)

    def apex_action(name: str, help_text: str) -> argparse.ArgumentParser:
        ap = actions.add_parser(name, help=help_text, description=help_text)
        ap.set_defaults(func=cmd_apex)
        add_config_option(ap)
        return ap

    apex_action("tasks", "list the task ids with their domain and difficulty (for --task and apex.tasks)")
    ap = apex_action("build", "generate the worlds of every task (or of --task ones) into suite.apex.out")
    ap.add_argument("--task", dest="tasks", action="append", help="build only this task (repeatable)")
    ap.add_argument("--out", help="build directory (default: suite.apex.out)")
    ap.add_argument("--rebuild", action="store_true", help="regenerate even where the cache is valid")
    ap = apex_action("serve", "serve one built task's workspace to your own agent over MCP")
    ap.add_argument("task", help="the task id (evoaudit apex tasks lists them)")
    ap.add_argument("--variant", default="v0", help="which built variant of the task's world (default: v0)")
    ap.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="MCP transport (default: stdio)"
    )
    ap.add_argument("--app", default="all", help="stdio: one app's server (files, mail, ...) or all")
    ap.add_argument("--port", type=int, default=0, help="http: first port (0 picks free ports)")
    ap.add_argument(
        "--record",
        help="append every call and result here as JSON lines (with --attack: the served-episode record "
        "apex score reads, rewritten after every call)",
    )
    ap.add_argument("--ready-file", help="http: write the server URLs here once listening")
    ap.add_argument("--out", help="the built worlds' directory (default: suite.apex.out)")
    ap.add_argument(
        "--attack",
        help="serve the world with this attack of the built attack set in place (its id, e.g. "
        "c3.ib_wacc.0), episode by episode; --record then writes a served-episode record for apex score",
    )
    ap = apex_action("score", "score a served episode's record as the workflow scores its own episodes")
    ap.add_argument("record", help="the record `apex serve --attack ID --record PATH` wrote")
    ap.add_argument("--episode", type=int, help="score only this episode (default: every one with calls)")
    ap.add_argument("--json", help="also write the scores here as JSON")
    ap.add_argument("--out", help="the built worlds' directory (default: suite.apex.out)")
    ap = apex_action("attacks", "generate the attack set for the built worlds (first of suite.apex.variants)")
    ap.add_argument("--out", help="directory to write attacks.json to (default: beside the worlds)")
    ap = apex_action("annotate", "label a sample of a run's exposure and safety decisions, on the terminal")
    ap.add_argument("--results", default=None, help="the run's results directory" + RESULTS_DEFAULT)
    ap.add_argument("--out", help="label file to write (default: <results>/apex/labels.jsonl)")
    ap.add_argument(
        "--per-class",
        type=int,
        default=10,
        help="decided-positive and decided-negative episodes per kind (balanced)",
    )
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")


def register(sub: argparse._SubParsersAction, add: Adder) -> None:
    """Add this group's commands to ``sub`` (``add`` makes a command's parser with --config)."""
    for parser in (_apex_parser,):
        parser(sub, add)
