"""Serving: the simulator as an OpenAI-compatible endpoint, and one AgentDojo instance to your own agent over
MCP (``evoaudit serve``) with its record scored as the workflow scores its episodes (``evoaudit score``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evoaudit.cli.common import AT, RESULTS_HELP, Adder, load_cfg


def cmd_serve_sim(args):
    import asyncio

    from evoaudit.models.sim.server import serve
    from evoaudit.ops.sim_oracle import make_handler

    handler = make_handler(
        load_cfg(args),
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


def cmd_serve(args):
    """``evoaudit serve``: one AgentDojo instance to an outside agent over MCP (``evaluate.served``)."""
    from evoaudit.evaluate.served.server import serve

    serve(
        load_cfg(args),
        args.instance,
        args.goal,
        args.condition,
        args.artifact,
        args.transport,
        args.port,
        args.record,
        args.ready_file,
    )


def cmd_score(args):
    """``evoaudit score``: a served instance's record scored as the workflow scores its episodes."""
    from evoaudit.evaluate.served.score import score_file

    score_file(load_cfg(args), args.record, args.condition, args.artifact, args.episode, args.json)


def _serve_sim_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("serve-sim", cmd_serve_sim, "serve the simulator as an OpenAI-compatible endpoint on 127.0.0.1")
    sp.add_argument("--port", type=int, default=8000, help="0 picks a free port (see --ready-file)")
    sp.add_argument("--instances", default=AT.suite("instances.parquet"), help="oracle plans")
    sp.add_argument(
        "--manifest", default=AT.freeze("manifest.json"), help="opens endpoint variants once verified"
    )
    sp.add_argument("--results", default=None, help=RESULTS_HELP)
    sp.add_argument("--model", help="model id to serve (default: executor.model)")
    sp.add_argument("--latency-ms", type=float, default=0.0, help="added to every chat completion")
    sp.add_argument("--ready-file", help="write {base_url, model} here once listening")


def _serve_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add(
        "serve", cmd_serve, "serve one AgentDojo instance to your own agent over MCP, every call recorded"
    )
    sp.add_argument(
        "--instance", required=True, help="instance id of the configured suite, e.g. user_task_0.v3"
    )
    sp.add_argument("--goal", help="place this injection goal's text (e.g. injection_task_0); default benign")
    sp.add_argument("--condition", help="deploy a frozen artifact in the system prompt under this condition")
    sp.add_argument("--artifact", help="the frozen artifact's directory (with --condition)")
    sp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    sp.add_argument("--port", type=int, default=0, help="http: the tool server's port (0: a free one)")
    sp.add_argument("--record", help="write the served-instance record here (evoaudit score reads it)")
    sp.add_argument("--ready-file", help="http: write the server URLs here once listening")


def _score_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = add("score", cmd_score, "score a served instance's record as the workflow scores its own episodes")
    sp.add_argument("record", help="the record `evoaudit serve --record PATH` wrote")
    sp.add_argument("--condition", help="the --condition the server was given")
    sp.add_argument("--artifact", help="the --artifact the server was given")
    sp.add_argument("--episode", type=int, help="score only this episode (default: every one with calls)")
    sp.add_argument("--json", help="also write the outcomes here as JSON")


def register(sub: argparse._SubParsersAction, add: Adder) -> None:
    """Add this group's commands to ``sub`` (``add`` makes a command's parser with --config)."""
    for parser in (_serve_sim_parser, _serve_parser, _score_parser):
        parser(sub, add)
