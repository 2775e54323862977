"""The ``evoaudit`` command: thin wrappers that parse arguments and call one package function each.

One module per command group (``stages``, ``results``, ``serve``, ``apex``, ``methods``), each with its
commands and a ``register`` that adds their parsers; ``common`` holds the configuration loading they share.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from evoaudit import config as config_mod
from evoaudit.cli import apex, methods, results, serve, stages
from evoaudit.cli.common import add_config_option, fill_results_dir
from evoaudit.errors import AuditError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evoaudit", description=__doc__.split("\n\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    p.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the openai backend's response cache"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, func, help_text):
        sp = sub.add_parser(name, help=help_text)
        sp.set_defaults(func=func)
        add_config_option(sp)
        return sp

    for group in (stages, results, serve, apex, methods):
        group.register(sub, add)
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
        fill_results_dir(args)
        args.func(args)
    except config_mod.ConfigError as exc:
        print(f"evoaudit: {exc}", file=sys.stderr)
        return 2
    except AuditError as exc:
        print(f"evoaudit: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`evoaudit validate-config | head`): nothing left to say. Point stdout at
        # /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command killed by it
    return 0


if __name__ == "__main__":
    sys.exit(main())
