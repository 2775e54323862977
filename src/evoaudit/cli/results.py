"""Commands over a run's results: plan and budget, traces, exports, bundles and their reproduction,
progress, infrastructure retries and the response cache."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evoaudit.cli.common import AT, RESULTS_DEFAULT, Adder, add_config_option, config_source, load_cfg
from evoaudit.errors import AuditError


def cmd_plan(args):
    from evoaudit.ops.plan import check_budget, format_plan, make_plan

    plan = make_plan(load_cfg(args), Path(args.results))
    print(json.dumps(plan.to_dict(), indent=2, sort_keys=True) if args.json else format_plan(plan))
    check_budget(plan, config_source(args))


def cmd_show(args):
    from evoaudit.report import trace

    results = Path(args.results)
    roots = [Path(p) for p in args.dir] if args.dir else trace.default_roots(results)
    rollout = trace.find_rollout(args.rollout_id, roots)
    if args.json:
        print(trace.render_json(rollout), end="")
        return
    suite = trace.rollout_suite(results, rollout.rollout_id)
    if suite is None:
        print(
            f"(no {results / 'config' / 'config.json'}: the run's suite is unknown, so the trace has no "
            "exposure marks and lists every executed call; pass --results pointing at the run's directory)"
        )
    print(trace.render(rollout, args.max_chars, suite=suite), end="")


def cmd_export(args):
    cfg, results = load_cfg(args), Path(args.results)
    if args.target == "inspect":
        # inspect_ai is an optional extra: imported only here.
        from evoaudit.report.export.inspect_logs import export_inspect

        written = export_inspect(
            cfg, results, Path(args.out or f"{args.results}/export/inspect"), args.format
        )
    else:
        from evoaudit.report.export.agentdojo_runs import export_agentdojo

        out = Path(args.out or f"{args.results}/export/agentdojo/runs")
        written = export_agentdojo(cfg, results, out, args.condition)
    print(json.dumps({"written": len(written), "first": written[0].as_posix() if written else None}))


def cmd_bundle(args):
    from evoaudit.ops.bundle import write_bundle

    manifest = write_bundle(load_cfg(args), Path(args.results), Path(args.out))
    beside = sum(e.role == "beside" for e in manifest.entries)
    print(
        json.dumps(
            {
                "bundle": args.out,
                "root": manifest.root,
                "files": len(manifest.entries),
                "beside_root": beside,
            },
            indent=2,
        )
    )


def cmd_reproduce(args):
    from evoaudit.ops.bundle import reproduce

    report = reproduce(
        Path(args.bundle),
        Path(args.workdir) if args.workdir else None,
        Path(args.snakefile),
        args.cores,
        Path(args.out) if args.out else None,
    )
    for c in report.files:
        if c.status != "identical":
            print(f"{c.status:9} {c.path}", file=sys.stderr)
    print(
        json.dumps(
            {
                k: getattr(report, k)
                for k in ("root", "identical", "differing", "missing", "extra", "workdir")
            },
            indent=2,
        )
    )
    if report.differing or report.missing or report.extra:
        raise AuditError(
            f"reproduce: {report.differing} differing, {report.missing} missing, {report.extra} extra of "
            f"{len(report.files)} derived files; every file's status is in "
            f"{args.out or Path(report.workdir) / 'reproduce.json'}"
        )


def cmd_retry_infra(args):
    from evoaudit.evaluate.retry_infra import retry_infra

    moved = retry_infra([Path(p) for p in args.paths], dry_run=args.dry_run)
    print(json.dumps({"moved_aside": moved, "rollouts": sum(moved.values())}, indent=2, sort_keys=True))
    if moved and not args.dry_run:
        print("rerun the same snakemake command: it redoes exactly these rollouts", file=sys.stderr)


def cmd_progress(args: argparse.Namespace) -> None:
    from evoaudit.ops import progress

    progress.watch(args.results, args.follow, args.every)


def cmd_cache(args):
    from evoaudit.models.cache import ResponseCache

    path = Path(args.path or load_cfg(args).executor.cache_path)
    if not path.exists():
        print(json.dumps({"path": path.as_posix(), "bytes": 0, "entries": 0, "by_endpoint": []}, indent=2))
        return
    cache = ResponseCache(path)
    try:
        if args.action == "clear":
            print(json.dumps({"path": path.as_posix(), "deleted": cache.clear()}, indent=2))
        else:
            print(json.dumps(cache.summary(), indent=2))
    finally:
        cache.close()


def _plan_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("plan", cmd_plan, "print rollouts, model requests and tokens per stage; fail over budget")
    sp.add_argument(
        "--results",
        default=None,
        help="results directory whose finished work is not counted" + RESULTS_DEFAULT,
    )
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")


def _show_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("show", cmd_show, "print one rollout's trace: messages, calls, injected text, state changes")
    sp.add_argument("rollout_id", help="e.g. L1/static/attacked/user_task_0.v3/injection_task_0")
    sp.add_argument(
        "--results", default=None, help="results directory (evaluate/ and transfer/)" + RESULTS_DEFAULT
    )
    sp.add_argument("--dir", nargs="*", help="search these shard directories instead")
    sp.add_argument("--max-chars", type=int, default=2000, help="longest message text shown per step")
    sp.add_argument("--json", action="store_true", help="print the full record as JSON")


def _export_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = sub.add_parser(
        "export", help="write the rollouts where other tools read them: Inspect AI logs, AgentDojo's layout"
    )
    targets = sp.add_subparsers(dest="target", required=True)
    for target, what, out in (
        (
            "inspect",
            "one Inspect AI eval log per (suite, lineage, condition, arm); needs the inspect extra",
            AT.export("inspect"),
        ),
        (
            "agentdojo",
            "one condition's Banking rollouts in AgentDojo's results layout (runs/<pipeline>/...)",
            AT.export("agentdojo/runs"),
        ),
    ):
        tp = targets.add_parser(target, help=what, description=what)
        tp.set_defaults(func=cmd_export)
        add_config_option(tp)
        tp.add_argument(
            "--results",
            default=None,
            help="results directory holding evaluate/ (and apex/runs/)" + RESULTS_DEFAULT,
        )
        tp.add_argument("--out", help=f"directory to write to (default: {out})")
        if target == "inspect":
            tp.add_argument(
                "--format", choices=["eval", "json"], default="eval", help="Inspect log format (default eval)"
            )
        else:
            tp.add_argument("--condition", default="static", help="condition to export (default: static)")


def _bundle_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add(
        "bundle",
        cmd_bundle,
        "write one archive of the run (records, artifacts, seal, rollouts, caches, reports) with a sha256 "
        "manifest whose root leaves timing out",
    )
    sp.add_argument("--results", default=None, help="results directory of a workflow run" + RESULTS_DEFAULT)
    sp.add_argument("--out", default="evoaudit-bundle.tar.gz", help="archive to write (.tar.gz)")


def _reproduce_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = sub.add_parser(
        "reproduce",
        help="re-derive a bundle's replay reports, tables and figures without any model call; compare bytes",
    )
    sp.set_defaults(func=cmd_reproduce)
    sp.add_argument("bundle", help="an archive written by `evoaudit bundle`")
    sp.add_argument("--workdir", help="new or empty directory to unpack and rebuild in (default: a temp dir)")
    sp.add_argument("--snakefile", default="Snakefile", help="the workflow to rebuild with (this checkout's)")
    sp.add_argument("--cores", type=int, default=2, help="Snakemake --cores for the rebuild")
    sp.add_argument("--out", help="where to write the per-file report (default: <workdir>/reproduce.json)")


def _retry_infra_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add(
        "retry-infra",
        cmd_retry_infra,
        "move the infrastructure-failed rollouts of published shards aside, so a rerun redoes exactly those",
    )
    sp.add_argument("paths", nargs="*", default=[AT.evaluate_root()], help="shards or directories of shards")
    sp.add_argument("--dry-run", action="store_true", help="only count what would be moved")


def _progress_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = sub.add_parser(
        "progress", help="rollouts done, rate and ETA across the run's jobs, read from their logs"
    )
    sp.set_defaults(func=cmd_progress)
    from evoaudit.ops import progress as progress_mod

    progress_mod.add_arguments(sp)
    add_config_option(sp)
    sp.set_defaults(results=None)  # the configuration's results_dir unless --results names another


def _cache_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("cache", cmd_cache, "show or clear the openai backend's persistent response cache")
    sp.add_argument("action", choices=["stats", "clear"], help="stats: entries per endpoint; clear: empty it")
    sp.add_argument("--path", help="cache file (default: executor.cache_path)")


def register(sub: argparse._SubParsersAction, add: Adder) -> None:
    """Add this group's commands to ``sub`` (``add`` makes a command's parser with --config)."""
    for parser in (
        _plan_parser,
        _show_parser,
        _export_parser,
        _bundle_parser,
        _reproduce_parser,
        _retry_infra_parser,
        _progress_parser,
        _cache_parser,
    ):
        parser(sub, add)
