"""The ``evoaudit`` command: thin wrappers that parse arguments and call one package function each."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from evoaudit import atomic
from evoaudit import config as config_mod
from evoaudit.errors import AuditError

RESULTS_DEFAULT = " (default: the configuration's results_dir)"
RESULTS_HELP = "results directory" + RESULTS_DEFAULT


def _fill_results_dir(args: argparse.Namespace) -> None:
    """``--results`` left out means the configuration's results_dir; so do the other path defaults, which
    are written ``{results}/...``."""
    templated = {
        k: v
        for k, v in vars(args).items()
        if (isinstance(v, str) and "{results}" in v)
        or (isinstance(v, list) and any("{results}" in str(x) for x in v))
    }
    if getattr(args, "results", "") is not None and not templated:
        return
    root = getattr(args, "results", None)
    if root is None:
        root = config_mod.load(args.config).results_dir if hasattr(args, "config") else "results"
        if hasattr(args, "results"):
            args.results = root
    for k, v in templated.items():
        fill = lambda x: x.replace("{results}", root.rstrip("/")) if isinstance(x, str) else x  # noqa: E731
        setattr(args, k, [fill(x) for x in v] if isinstance(v, list) else fill(v))


def _cfg(args: argparse.Namespace) -> config_mod.Config:
    cfg = config_mod.load(args.config)
    if cfg.suite.families is not None or cfg.apex.tasks is not None:
        from evoaudit.suite.registry import check_selection  # loads a suite: only for a selection

        check_selection(cfg, str(args.config))
    if getattr(args, "no_cache", False):  # evoaudit --no-cache: the response cache is not read or written
        cfg = config_mod.without_cache(cfg)
    return cfg


def cmd_validate_config(args):
    from evoaudit.credentials import public_config

    cfg = _cfg(args)
    print(json.dumps(public_config(cfg.full_dump()), indent=2, sort_keys=True))


def cmd_audit_checkers(args):
    from evoaudit.suite.stage import run_checker_audit

    summary = run_checker_audit(_cfg(args), Path(args.csv), Path(args.summary))
    print(json.dumps(summary, indent=2, sort_keys=True))


def cmd_instances(args):
    from evoaudit.suite.registry import stage_inputs
    from evoaudit.suite.stage import make_instances

    cfg = _cfg(args)
    # The same further inputs the workflow's instances rule gives the configured suite.
    inputs = {name: Path(path) for name, path in stage_inputs(cfg).items()}
    spec = make_instances(cfg, Path(args.audit_summary), Path(args.table), Path(args.spec), inputs)
    print(f"instance table sha256 {spec['instances_sha256']}")


def cmd_acquire(args):
    from evoaudit.evaluate.acquire import acquire

    info = acquire(
        _cfg(args), args.lineage, Path(args.table), Path(args.spec), Path(args.out), Path(args.record)
    )
    print(json.dumps(info, indent=2, sort_keys=True))


def cmd_evolve(args):
    from evoaudit.methods.evolve import evolve

    evolve(
        _cfg(args),
        args.lineage,
        args.method,
        Path(args.acquisition),
        Path(args.record),
        Path(args.out),
        table=Path(args.table) if args.table else None,
    )


def cmd_placebo(args):
    from evoaudit.methods.evolve import placebo

    info = placebo(_cfg(args), args.lineage, args.method, Path(args.real), Path(args.out))
    print(json.dumps(info, indent=2, sort_keys=True))


def cmd_freeze(args):
    from evoaudit.seal.stage import freeze_stage

    manifest = freeze_stage(
        _cfg(args),
        [Path(p) for p in args.paths],
        Path(args.results),
        Path(args.manifest),
        lineage=args.lineage,
        combine=args.combine,
    )
    print(f"froze {len(manifest.entries)} files, manifest root {manifest.root}")


def cmd_unseal(args):
    from evoaudit.seal.stage import unseal_stage

    event = unseal_stage(
        _cfg(args),
        Path(args.manifest),
        Path(args.results),
        Path(args.event),
        lineage=args.lineage,
        force=args.force,
    )
    print(event.dumps(), end="")


def cmd_redo(args):
    from evoaudit.seal.stage import redo_stage

    entries = redo_stage(_cfg(args), Path(args.results), args.lineage, args.artifact, args.reason)
    print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2, sort_keys=True))


def cmd_verify(args):
    from evoaudit.evaluate.verify import verify_stage

    report = verify_stage(
        _cfg(args),
        [Path(p) for p in args.shards],
        table=Path(args.table),
        spec=Path(args.spec),
        results_dir=Path(args.results),
        out=Path(args.out),
        sample=args.sample,
    )
    print(f"verified {report['verified']} of {report['sampled']} rerun rollouts identical to their records")


def cmd_evaluate(args):
    from evoaudit.evaluate.stage import evaluate_shard

    evaluate_shard(
        _cfg(args),
        args.lineage,
        args.condition,
        args.arm,
        args.shard,
        table=Path(args.table),
        spec=Path(args.spec),
        manifest_path=Path(args.manifest),
        unseal_event=Path(args.event),
        artifact_dir=Path(args.artifact),
        results_dir=Path(args.results),
        out=Path(args.out),
    )


def cmd_replay(args):
    from evoaudit.replay.stage import replay_stage

    seal = {}
    if args.spec or args.manifest or args.event:
        # The sealed endpoint file opens only through the seal: all three, or the replay refuses it.
        missing = [f"--{n}" for n in ("spec", "manifest", "event") if not getattr(args, n)]
        if missing:
            raise AuditError(f"evoaudit replay: {', '.join(missing)} needed with the other seal options")
        seal = {
            "spec": Path(args.spec),
            "manifest": Path(args.manifest),
            "event": Path(args.event),
            "results_dir": Path(args.results),
        }
    report = replay_stage(
        _cfg(args), Path(args.rollouts), Path(args.table), Path(args.out), args.on_mismatch, **seal
    )
    print(f"replayed {report['replayed']} rollouts, {report['mismatched_rollouts']} mismatched")


def cmd_report(args):
    from evoaudit.report.stage import report_stage

    report_stage(
        _cfg(args),
        [Path(p) for p in args.rollouts],
        [Path(p) for p in args.replays],
        Path(args.out),
        transfer=[Path(p) for p in args.transfer],
        metas=[Path(p) for p in args.metas],
        audit_summary=Path(args.audit_summary) if args.audit_summary else None,
        manifest=Path(args.manifest) if args.manifest else None,
        spec=Path(args.spec) if args.spec else None,
    )


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
    cfg, results = _cfg(args), Path(args.results)
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

    manifest = write_bundle(_cfg(args), Path(args.results), Path(args.out))
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


def cmd_transfer_config(args):
    from evoaudit.transfer_config import write_transfer_config

    write_transfer_config(_cfg(args), Path(args.out))


def cmd_plan(args):
    from evoaudit.ops.plan import check_budget, format_plan, make_plan

    plan = make_plan(_cfg(args), Path(args.results))
    print(json.dumps(plan.to_dict(), indent=2, sort_keys=True) if args.json else format_plan(plan))
    check_budget(plan, args.config)


def cmd_serve_sim(args):
    import asyncio

    from evoaudit.models.sim.server import serve
    from evoaudit.ops.sim_oracle import make_handler

    handler = make_handler(
        _cfg(args),
        Path(args.instances),
        Path(args.manifest) if args.manifest else None,
        Path(args.results),
        model=args.model,
        latency_s=args.latency_ms / 1000,
    )
    try:
        asyncio.run(serve(handler, args.port, Path(args.ready_file) if args.ready_file else None))
    except KeyboardInterrupt:
        pass


def cmd_apex(args):
    from evoaudit.suite.commands import get_commands

    commands = get_commands("apex")
    apex_cfg = config_mod.load(args.config).suite.apex
    if args.apex_action == "tasks":
        for task_id, domain, difficulty in commands.tasks():
            print(f"{task_id:<24} {domain:<20} {difficulty}")
    elif args.apex_action == "build":
        commands.build(apex_cfg, args.out, args.tasks, args.rebuild)
    elif args.apex_action == "annotate":
        from evoaudit.report.apex.agreement import annotate_run

        annotate_run(
            Path(args.results),
            Path(args.out or f"{args.results}/apex/labels.jsonl"),
            args.per_class,
            args.seed,
            sys.stdin,
            lambda text: print(text, end="", flush=True),
        )
    elif args.apex_action == "attacks":
        from evoaudit.models.structured import endpoint_transport
        from evoaudit.suite.roles import get_roles

        full = config_mod.load(args.config)
        out = Path(args.out) / "attacks.json" if args.out else None
        attacker = get_roles("apex").make_attacker(full.suite.apex.attacker, endpoint_transport)
        path, sha = commands.build_attacks(full, attacker, out)
        print(json.dumps({"attack_set": path.as_posix(), "sha256": sha}))
    elif args.apex_action == "score":
        apex_score(args)
    else:
        commands.serve(
            apex_cfg,
            args.task,
            args.variant,
            args.transport,
            args.app,
            args.port,
            args.record,
            args.ready_file,
            args.out,
            attack=args.attack,
            cfg=config_mod.load(args.config) if args.attack else None,
        )


def apex_score(args) -> list[dict]:
    """Score a served episode's record as the workflow scores its own episodes (``report.apex.served``)."""
    from evoaudit.evaluate.apex.judge import stage_judge
    from evoaudit.report.apex import served
    from evoaudit.suite.commands import get_commands

    cfg = config_mod.load(args.config)
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
    return rows


def cmd_retry_infra(args):
    from evoaudit.evaluate.retry_infra import retry_infra

    moved = retry_infra([Path(p) for p in args.paths], dry_run=args.dry_run)
    print(json.dumps({"moved_aside": moved, "rollouts": sum(moved.values())}, indent=2, sort_keys=True))
    if moved and not args.dry_run:
        print("rerun the same snakemake command: it redoes exactly these rollouts", file=sys.stderr)


def cmd_cache(args):
    from evoaudit.models.cache import ResponseCache

    path = Path(args.path or _cfg(args).executor.cache_path)
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


def cmd_progress(args: argparse.Namespace) -> None:
    from evoaudit.ops import progress

    progress.watch(args.results, args.follow, args.every)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evoaudit", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    p.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the openai backend's response cache"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, func, help_text):
        sp = sub.add_parser(name, help=help_text)
        sp.set_defaults(func=func)
        sp.add_argument("--config", default="config/config.yaml", help="configuration file (YAML or JSON)")
        return sp

    add(
        "validate-config",
        cmd_validate_config,
        "validate a configuration and print it with defaults filled in",
    )

    sp = add("audit-checkers", cmd_audit_checkers, "probe every official predicate; no model is called")
    sp.add_argument("--csv", default="{results}/suite/checker_audit.csv", help="per-probe table to write")
    sp.add_argument(
        "--summary", default="{results}/suite/checker_audit_summary.json", help="defect classes per family"
    )

    sp = add("instances", cmd_instances, "materialise families × variants and the frozen suite spec")
    sp.add_argument(
        "--audit-summary",
        default="{results}/suite/checker_audit_summary.json",
        help="the checker audit's summary (which predicates to repair or exclude)",
    )
    sp.add_argument("--table", default="{results}/suite/instances.parquet", help="instance table to write")
    sp.add_argument("--spec", default="{results}/suite/suite_spec.json", help="frozen suite spec to write")

    sp = add("acquire", cmd_acquire, "run the unevolved executor on the acquisition variants of one lineage")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--table", "instance table (results/suite/instances.parquet)"),
        ("--spec", "frozen suite spec (results/suite/suite_spec.json)"),
        ("--out", "acquisition record to write (rollouts.jsonl)"),
        ("--record", "its sha256 record to write (record.json)"),
    ):
        sp.add_argument(a, required=True, help=what)

    sp = add("evolve", cmd_evolve, "evolve one method for one lineage from its acquisition record")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--method", "static, skillopt, awm or reasoningbank"),
        ("--acquisition", "the lineage's acquisition record (rollouts.jsonl)"),
        ("--record", "its sha256 record (record.json), checked before anything is read"),
        ("--out", "artifact directory to write"),
    ):
        sp.add_argument(a, required=True, help=what)
    sp.add_argument("--table", help="instance table (learning variants only; every method but static)")

    sp = add("placebo", cmd_placebo, "build a method's placebo artifact, shaped after its real artifact")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--method", "the method whose artifact the placebo imitates"),
        ("--real", "that method's artifact directory"),
        ("--out", "placebo artifact directory to write"),
    ):
        sp.add_argument(a, required=True, help=what)

    sp = add("freeze", cmd_freeze, "hash every artifact into the freeze manifest and make them read-only")
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--manifest", default="{results}/freeze/manifest.json", help="freeze manifest to write")
    sp.add_argument("--lineage", help="freeze the given artifact directories as this lineage's manifest")
    sp.add_argument("--combine", action="store_true", help="combine lineage manifests")
    sp.add_argument("paths", nargs="+", help="artifact directories (or lineage manifests with --combine)")

    sp = add("unseal", cmd_unseal, "record the unseal event for a verified freeze manifest")
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--manifest", default="{results}/freeze/manifest.json", help="freeze manifest to verify")
    sp.add_argument("--event", default="{results}/freeze/unseal.json", help="unseal event to write")
    sp.add_argument("--lineage", help="open one lineage (its manifest given with --manifest)")
    sp.add_argument(
        "--force", action="store_true", help="record a forced unseal for a different manifest root"
    )

    sp = add(
        "redo",
        cmd_redo,
        "archive an artifact that endpoints were unsealed with, so that the next run evolves it again",
    )
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--lineage", required=True, help="lineage name, e.g. L2")
    sp.add_argument("--artifact", required=True, help="method or placebo-<method>, e.g. skillopt")
    sp.add_argument("--reason", required=True, help="why; recorded in freeze/superseded/log.jsonl")

    sp = add("verify", cmd_verify, "rerun a sample of recorded rollouts and require byte-identical records")
    for a, what in (
        ("--table", "instance table (results/suite/instances.parquet)"),
        ("--spec", "frozen suite spec (results/suite/suite_spec.json)"),
        ("--out", "report to write (verify.json)"),
    ):
        sp.add_argument(a, required=True, help=what)
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--sample", type=int, help="rollouts to rerun (default: seal.verify_sample)")
    sp.add_argument("shards", nargs="+", help="evaluation shards under <results>/evaluate/")

    sp = add("evaluate", cmd_evaluate, "run one evaluation shard")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--condition", "condition, e.g. static, skillopt, awm-literal, placebo-awm"),
        ("--table", "the sealed endpoint table (results/suite/endpoint.parquet)"),
        ("--spec", "frozen suite spec (results/suite/suite_spec.json)"),
        ("--artifact", "the condition's artifact directory"),
        ("--out", "shard to write (shardK.jsonl)"),
    ):
        sp.add_argument(a, required=True, help=what)
    sp.add_argument("--arm", required=True, choices=["benign", "attacked"], help="which arm's episodes")
    sp.add_argument("--shard", type=int, default=0, help="shard index (of evaluation.shards)")
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--manifest", default="{results}/freeze/manifest.json", help="freeze manifest")
    sp.add_argument("--event", default="{results}/freeze/unseal.json", help="unseal event for that manifest")

    sp = add("replay", cmd_replay, "independently recompute one evaluation shard")
    for a, what in (
        ("--rollouts", "evaluation shard to replay"),
        ("--table", "instance table the shard's episodes came from"),
        ("--out", "replay report to write"),
    ):
        sp.add_argument(a, required=True, help=what)
    sp.add_argument(
        "--on-mismatch", choices=["fail", "record"], default="fail", help="fail (default) or only record"
    )
    # The endpoint file (results/suite/endpoint.parquet) is sealed: it is read only with all three.
    sp.add_argument("--spec", help="suite spec committing the endpoint file's sha256 (sealed tables)")
    sp.add_argument("--manifest", help="freeze manifest the unseal event names (sealed tables)")
    sp.add_argument("--event", help="unseal event for that manifest (sealed tables)")
    sp.add_argument(
        "--results", default=None, help="results directory the manifest's paths are under" + RESULTS_DEFAULT
    )

    sp = add("plan", cmd_plan, "print rollouts, model requests and tokens per stage; fail over budget")
    sp.add_argument(
        "--results",
        default=None,
        help="results directory whose finished work is not counted" + RESULTS_DEFAULT,
    )
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")

    sp = add("report", cmd_report, "build tables and report.md")
    sp.add_argument("--rollouts", nargs="+", required=True, help="evaluation shards")
    sp.add_argument("--replays", nargs="*", default=[], help="their replay reports")
    sp.add_argument("--manifest", help="freeze manifest (its root goes in the report)")
    sp.add_argument("--spec", help="frozen suite spec")
    sp.add_argument("--audit-summary", help="checker audit summary ('passing': the sensitivity subset)")
    sp.add_argument("--metas", nargs="*", default=[], help="artifact meta.json files (evolution diagnostics)")
    sp.add_argument("--transfer", nargs="*", default=[], help="rollout shards from the second executor")
    sp.add_argument("--out", default="{results}/report", help="report directory to write")

    sp = add("show", cmd_show, "print one rollout's trace: messages, calls, injected text, state changes")
    sp.add_argument("rollout_id", help="e.g. L1/static/attacked/user_task_0.v3/injection_task_0")
    sp.add_argument(
        "--results", default=None, help="results directory (evaluate/ and transfer/)" + RESULTS_DEFAULT
    )
    sp.add_argument("--dir", nargs="*", help="search these shard directories instead")
    sp.add_argument("--max-chars", type=int, default=2000, help="longest message text shown per step")
    sp.add_argument("--json", action="store_true", help="print the full record as JSON")

    sp = sub.add_parser(
        "export", help="write the rollouts where other tools read them: Inspect AI logs, AgentDojo's layout"
    )
    targets = sp.add_subparsers(dest="target", required=True)
    for target, what, out in (
        (
            "inspect",
            "one Inspect AI eval log per (suite, lineage, condition, arm); needs the inspect extra",
            "{results}/export/inspect",
        ),
        (
            "agentdojo",
            "one condition's Banking rollouts in AgentDojo's results layout (runs/<pipeline>/...)",
            "{results}/export/agentdojo/runs",
        ),
    ):
        tp = targets.add_parser(target, help=what, description=what)
        tp.set_defaults(func=cmd_export)
        tp.add_argument("--config", default="config/config.yaml", help="configuration file (YAML or JSON)")
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

    sp = add(
        "bundle",
        cmd_bundle,
        "write one archive of the run (records, artifacts, seal, rollouts, caches, reports) with a sha256 "
        "manifest whose root leaves timing out",
    )
    sp.add_argument("--results", default=None, help="results directory of a workflow run" + RESULTS_DEFAULT)
    sp.add_argument("--out", default="evoaudit-bundle.tar.gz", help="archive to write (.tar.gz)")

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

    sp = add("transfer-config", cmd_transfer_config, "write the configuration of the cross-executor check")
    sp.add_argument("--out", required=True, help="derived configuration to write (transfer/config.json)")

    sp = add("serve-sim", cmd_serve_sim, "serve the simulator as an OpenAI-compatible endpoint on 127.0.0.1")
    sp.add_argument("--port", type=int, default=8000, help="0 picks a free port (see --ready-file)")
    sp.add_argument("--instances", default="{results}/suite/instances.parquet", help="oracle plans")
    sp.add_argument(
        "--manifest", default="{results}/freeze/manifest.json", help="opens endpoint variants once verified"
    )
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--model", help="model id to serve (default: executor.model)")
    sp.add_argument("--latency-ms", type=float, default=0.0, help="added to every chat completion")
    sp.add_argument("--ready-file", help="write {base_url, model} here once listening")

    sp = add(
        "retry-infra",
        cmd_retry_infra,
        "move the infrastructure-failed rollouts of published shards aside, so a rerun redoes exactly those",
    )
    sp.add_argument(
        "paths", nargs="*", default=["{results}/evaluate"], help="shards or directories of shards"
    )
    sp.add_argument("--dry-run", action="store_true", help="only count what would be moved")

    sp = sub.add_parser(
        "progress", help="rollouts done, rate and ETA across the run's jobs, read from their logs"
    )
    sp.set_defaults(func=cmd_progress)
    from evoaudit.ops import progress as progress_mod

    progress_mod.add_arguments(sp)
    sp.add_argument("--config", default="config/config.yaml", help="configuration file (YAML or JSON)")
    sp.set_defaults(results=None)  # the configuration's results_dir unless --results names another

    sp = add("cache", cmd_cache, "show or clear the openai backend's persistent response cache")
    sp.add_argument("action", choices=["stats", "clear"], help="stats: entries per endpoint; clear: empty it")
    sp.add_argument("--path", help="cache file (default: executor.cache_path)")

    apex = sub.add_parser(
        "apex",
        help="APEX-Harm workspaces: list the tasks, build the worlds or the attack set, serve one over MCP, "
        "or label a run's exposure and safety decisions",
    )
    actions = apex.add_subparsers(dest="apex_action", required=True)

    def apex_action(name: str, help_text: str) -> argparse.ArgumentParser:
        ap = actions.add_parser(name, help=help_text, description=help_text)
        ap.set_defaults(func=cmd_apex)
        ap.add_argument("--config", default="config/config.yaml", help="configuration file (YAML or JSON)")
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
        "c1a.<task>.0), episode by episode; --record then writes a served-episode record for apex score",
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
    return p


# AgentDojo's calendar orders a new event's participants by iterating a set of strings, which follows
# Python's per-process hash seed; the workflow runs every job with seed 0, and so does this command, so
# that its evaluation and replay see the states the workflow's do.
_HASH_SEED = "0"


def main(argv: list[str] | None = None) -> int:
    if argv is None and os.environ.get("PYTHONHASHSEED") != _HASH_SEED:
        # Started as the `evoaudit` command: run again at once under the workflow's hash seed.
        env = {**os.environ, "PYTHONHASHSEED": _HASH_SEED}
        code = "import sys; from evoaudit.cli import main; sys.exit(main())"
        os.execve(sys.executable, [sys.executable, "-c", code, *sys.argv[1:]], env)
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        _fill_results_dir(args)
        args.func(args)
    except config_mod.ConfigError as exc:
        print(f"evoaudit: {exc}", file=sys.stderr)
        return 2
    except AuditError as exc:
        print(f"evoaudit: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
