"""The ``evoaudit`` command: thin wrappers that parse arguments and call one package function each."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from evoaudit import config as config_mod
from evoaudit.errors import AuditError


def _cfg(args: argparse.Namespace) -> config_mod.Config:
    return config_mod.load(args.config)


def cmd_validate_config(args):
    cfg = _cfg(args)
    print(json.dumps(cfg.model_dump(mode="json"), indent=2, sort_keys=True))


def cmd_audit_checkers(args):
    from evoaudit.suite.stage import run_checker_audit

    summary = run_checker_audit(_cfg(args), Path(args.csv), Path(args.summary))
    print(json.dumps(summary, indent=2, sort_keys=True))


def cmd_instances(args):
    from evoaudit.suite.stage import make_instances

    spec = make_instances(_cfg(args), Path(args.audit_summary), Path(args.table), Path(args.spec))
    print(f"instance table sha256 {spec['instances_sha256']}")


def cmd_acquire(args):
    from evoaudit.evaluate.acquire import acquire

    info = acquire(
        _cfg(args), args.lineage, Path(args.table), Path(args.spec), Path(args.out), Path(args.record)
    )
    print(json.dumps(info, indent=2, sort_keys=True))


def cmd_evolve(args):
    from evoaudit.methods.evolve import evolve

    evolve(_cfg(args), args.lineage, args.method, Path(args.acquisition), Path(args.record), Path(args.out))


def cmd_freeze(args):
    from evoaudit.seal.freeze import freeze

    manifest = freeze([Path(p) for p in args.artifacts], Path(args.results), Path(args.manifest))
    print(f"froze {len(manifest.entries)} files, manifest root {manifest.root}")


def cmd_unseal(args):
    from evoaudit.seal.freeze import unseal

    event = unseal(Path(args.manifest), Path(args.results), Path(args.event), force=args.force)
    print(json.dumps(event, indent=2, sort_keys=True))


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
    from evoaudit.replay.stage import replay_shard

    report = replay_shard(Path(args.rollouts), Path(args.table), Path(args.out))
    print(f"replayed {report['replayed']} rollouts, {report['mismatched_rollouts']} mismatched")


def cmd_report(args):
    from evoaudit.provenance import provenance
    from evoaudit.report.build import build_report

    cfg = _cfg(args)
    extra = {}
    if args.manifest:
        extra["manifest_root"] = json.loads(Path(args.manifest).read_text())["root"]
    if args.spec:
        extra["suite_spec"] = json.loads(Path(args.spec).read_text())["instances_sha256"]
    build_report(
        cfg,
        [Path(p) for p in args.rollouts],
        [Path(p) for p in args.replays],
        provenance(cfg, **extra),
        Path(args.out),
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evoaudit", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
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
    sp.add_argument("--csv", default="results/suite/checker_audit.csv")
    sp.add_argument("--summary", default="results/suite/checker_audit_summary.json")

    sp = add("instances", cmd_instances, "materialise families × variants and the frozen suite spec")
    sp.add_argument("--audit-summary", default="results/suite/checker_audit_summary.json")
    sp.add_argument("--table", default="results/suite/instances.parquet")
    sp.add_argument("--spec", default="results/suite/suite_spec.json")

    sp = add("acquire", cmd_acquire, "run the unevolved executor on the acquisition variants of one lineage")
    for a in ("--lineage", "--table", "--spec", "--out", "--record"):
        sp.add_argument(a, required=True)

    sp = add("evolve", cmd_evolve, "evolve one method for one lineage from its acquisition record")
    for a in ("--lineage", "--method", "--acquisition", "--record", "--out"):
        sp.add_argument(a, required=True)

    sp = add("freeze", cmd_freeze, "hash every artifact into the freeze manifest and make them read-only")
    sp.add_argument("--results", default="results")
    sp.add_argument("--manifest", default="results/freeze/manifest.json")
    sp.add_argument("artifacts", nargs="+")

    sp = add("unseal", cmd_unseal, "record the unseal event for a verified freeze manifest")
    sp.add_argument("--results", default="results")
    sp.add_argument("--manifest", default="results/freeze/manifest.json")
    sp.add_argument("--event", default="results/freeze/unseal.json")
    sp.add_argument(
        "--force", action="store_true", help="record a forced unseal for a different manifest root"
    )

    sp = add("evaluate", cmd_evaluate, "run one evaluation shard")
    for a in ("--lineage", "--condition", "--table", "--spec", "--artifact", "--out"):
        sp.add_argument(a, required=True)
    sp.add_argument("--arm", required=True, choices=["benign", "attacked"])
    sp.add_argument("--shard", type=int, default=0)
    sp.add_argument("--results", default="results")
    sp.add_argument("--manifest", default="results/freeze/manifest.json")
    sp.add_argument("--event", default="results/freeze/unseal.json")

    sp = add("replay", cmd_replay, "independently recompute one evaluation shard")
    for a in ("--rollouts", "--table", "--out"):
        sp.add_argument(a, required=True)

    sp = add("report", cmd_report, "build tables and report.md")
    sp.add_argument("--rollouts", nargs="+", required=True)
    sp.add_argument("--replays", nargs="*", default=[])
    sp.add_argument("--manifest")
    sp.add_argument("--spec")
    sp.add_argument("--out", default="results/report")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
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
