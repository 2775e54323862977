"""The stage commands: each runs one stage of the audit as the workflow's rule does (one package call)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evoaudit.cli.common import AT, RESULTS_DEFAULT, RESULTS_HELP, Adder, config_source, load_cfg
from evoaudit.errors import AuditError


def cmd_validate_config(args):
    from evoaudit.credentials import public_config
    from evoaudit.methods.conditions import check_conditions

    cfg = load_cfg(args)
    check_conditions(cfg, config_source(args))
    print(json.dumps(public_config(cfg.full_dump()), indent=2, sort_keys=True))


def cmd_audit_checkers(args):
    from evoaudit.suite.stage import run_checker_audit

    summary = run_checker_audit(load_cfg(args), Path(args.csv), Path(args.summary))
    print(json.dumps(summary, indent=2, sort_keys=True))


def cmd_instances(args):
    from evoaudit.suite.registry import stage_inputs
    from evoaudit.suite.stage import make_instances

    cfg = load_cfg(args)
    # The same further inputs the workflow's instances rule gives the configured suite.
    inputs = {name: Path(path) for name, path in stage_inputs(cfg).items()}
    spec = make_instances(cfg, Path(args.audit_summary), Path(args.table), Path(args.spec), inputs)
    print(f"instance table sha256 {spec['instances_sha256']}")


def cmd_acquire(args):
    from evoaudit.evaluate.acquire import acquire

    info = acquire(
        load_cfg(args), args.lineage, Path(args.table), Path(args.spec), Path(args.out), Path(args.record)
    )
    print(json.dumps(info, indent=2, sort_keys=True))


def cmd_evolve(args):
    from evoaudit.methods.evolve import evolve

    evolve(
        load_cfg(args),
        args.lineage,
        args.method,
        Path(args.acquisition),
        Path(args.record),
        Path(args.out),
        table=Path(args.table) if args.table else None,
        screened=(Path(args.screened[0]), Path(args.screened[1])) if args.screened else None,
    )


def cmd_placebo(args):
    from evoaudit.methods.evolve import placebo

    info = placebo(load_cfg(args), args.lineage, args.method, Path(args.real), Path(args.out))
    print(json.dumps(info, indent=2, sort_keys=True))


def cmd_freeze(args):
    from evoaudit.seal.stage import freeze_stage

    manifest = freeze_stage(
        load_cfg(args),
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
        load_cfg(args),
        Path(args.manifest),
        Path(args.results),
        Path(args.event),
        lineage=args.lineage,
        force=args.force,
    )
    print(event.dumps(), end="")


def cmd_redo(args):
    from evoaudit.seal.stage import redo_stage

    entries = redo_stage(load_cfg(args), Path(args.results), args.lineage, args.artifact, args.reason)
    print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2, sort_keys=True))


def cmd_verify(args):
    from evoaudit.evaluate.verify import verify_stage

    report = verify_stage(
        load_cfg(args),
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
        load_cfg(args),
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
        load_cfg(args), Path(args.rollouts), Path(args.table), Path(args.out), args.on_mismatch, **seal
    )
    print(f"replayed {report['replayed']} rollouts, {report['mismatched_rollouts']} mismatched")


def cmd_report(args):
    from evoaudit.report.stage import report_stage

    report_stage(
        load_cfg(args),
        [Path(p) for p in args.rollouts],
        [Path(p) for p in args.replays],
        Path(args.out),
        transfer=[Path(p) for p in args.transfer],
        metas=[Path(p) for p in args.metas],
        audit_summary=Path(args.audit_summary) if args.audit_summary else None,
        manifest=Path(args.manifest) if args.manifest else None,
        spec=Path(args.spec) if args.spec else None,
    )


def cmd_transfer_config(args):
    from evoaudit.transfer_config import write_transfer_config

    write_transfer_config(load_cfg(args), Path(args.out))


def _validate_config_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    add(
        "validate-config",
        cmd_validate_config,
        "validate a configuration and print it with defaults filled in",
    )


def _audit_checkers_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("audit-checkers", cmd_audit_checkers, "probe every official predicate; no model is called")
    sp.add_argument("--csv", default=AT.suite("checker_audit.csv"), help="per-probe table to write")
    sp.add_argument(
        "--summary", default=AT.suite("checker_audit_summary.json"), help="defect classes per family"
    )


def _instances_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("instances", cmd_instances, "materialise families × variants and the frozen suite spec")
    sp.add_argument(
        "--audit-summary",
        default=AT.suite("checker_audit_summary.json"),
        help="the checker audit's summary (which predicates to repair or exclude)",
    )
    sp.add_argument("--table", default=AT.suite("instances.parquet"), help="instance table to write")
    sp.add_argument("--spec", default=AT.suite("suite_spec.json"), help="frozen suite spec to write")


def _acquire_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("acquire", cmd_acquire, "run the unevolved executor on the acquisition variants of one lineage")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--table", "instance table (results/suite/instances.parquet)"),
        ("--spec", "frozen suite spec (results/suite/suite_spec.json)"),
        ("--out", "acquisition record to write (rollouts.jsonl)"),
        ("--record", "its sha256 record to write (record.json)"),
    ):
        sp.add_argument(a, required=True, help=what)


def _evolve_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("evolve", cmd_evolve, "evolve one method for one lineage from its acquisition record")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--method", "an installed method, e.g. static, skillopt, awm or reasoningbank"),
        ("--acquisition", "the lineage's acquisition record (rollouts.jsonl)"),
        ("--record", "its sha256 record (record.json), checked before anything is read"),
        ("--out", "artifact directory to write"),
    ):
        sp.add_argument(a, required=True, help=what)
    sp.add_argument("--table", help="instance table (learning variants only; every method but static)")
    sp.add_argument(
        "--screened",
        nargs=2,
        metavar=("ROLLOUTS", "RECORD"),
        help="with write_defenses.screens: the screened rollouts.jsonl and record.json (rule write_screen)",
    )


def _placebo_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("placebo", cmd_placebo, "build a method's placebo artifact, shaped after its real artifact")
    for a, what in (
        ("--lineage", "lineage name, e.g. L1"),
        ("--method", "the method whose artifact the placebo imitates"),
        ("--real", "that method's artifact directory"),
        ("--out", "placebo artifact directory to write"),
    ):
        sp.add_argument(a, required=True, help=what)


def _freeze_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("freeze", cmd_freeze, "hash every artifact into the freeze manifest and make them read-only")
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--manifest", default=AT.freeze("manifest.json"), help="freeze manifest to write")
    sp.add_argument("--lineage", help="freeze the given artifact directories as this lineage's manifest")
    sp.add_argument("--combine", action="store_true", help="combine lineage manifests")
    sp.add_argument("paths", nargs="+", help="artifact directories (or lineage manifests with --combine)")


def _unseal_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("unseal", cmd_unseal, "record the unseal event for a verified freeze manifest")
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--manifest", default=AT.freeze("manifest.json"), help="freeze manifest to verify")
    sp.add_argument("--event", default=AT.freeze("unseal.json"), help="unseal event to write")
    sp.add_argument("--lineage", help="open one lineage (its manifest given with --manifest)")
    sp.add_argument(
        "--force", action="store_true", help="record a forced unseal for a different manifest root"
    )


def _redo_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add(
        "redo",
        cmd_redo,
        "archive an artifact that endpoints were unsealed with, so that the next run evolves it again",
    )
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--lineage", required=True, help="lineage name, e.g. L2")
    sp.add_argument("--artifact", required=True, help="method or placebo-<method>, e.g. skillopt")
    sp.add_argument("--reason", required=True, help="why; recorded in freeze/superseded/log.jsonl")


def _verify_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
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


def _evaluate_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
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
    sp.add_argument("--manifest", default=AT.freeze("manifest.json"), help="freeze manifest")
    sp.add_argument("--event", default=AT.freeze("unseal.json"), help="unseal event for that manifest")


def _replay_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
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


def _report_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("report", cmd_report, "build tables and report.md")
    sp.add_argument("--rollouts", nargs="+", required=True, help="evaluation shards")
    sp.add_argument("--replays", nargs="*", default=[], help="their replay reports")
    sp.add_argument("--manifest", help="freeze manifest (its root goes in the report)")
    sp.add_argument("--spec", help="frozen suite spec")
    sp.add_argument("--audit-summary", help="checker audit summary ('passing': the sensitivity subset)")
    sp.add_argument("--metas", nargs="*", default=[], help="artifact meta.json files (evolution diagnostics)")
    sp.add_argument("--transfer", nargs="*", default=[], help="rollout shards from the second executor")
    sp.add_argument("--out", default=AT.report(), help="report directory to write")


def _transfer_config_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("transfer-config", cmd_transfer_config, "write the configuration of the cross-executor check")
    sp.add_argument("--out", required=True, help="derived configuration to write (transfer/config.json)")


def register(sub: argparse._SubParsersAction, add: Adder) -> None:
    """Add this group's commands to ``sub`` (``add`` makes a command's parser with --config)."""
    for parser in (
        _validate_config_parser,
        _audit_checkers_parser,
        _instances_parser,
        _acquire_parser,
        _evolve_parser,
        _placebo_parser,
        _freeze_parser,
        _unseal_parser,
        _redo_parser,
        _verify_parser,
        _evaluate_parser,
        _replay_parser,
        _report_parser,
        _transfer_config_parser,
    ):
        parser(sub, add)
