"""A method of one's own: the template package of a self-evolving method (docs/methods.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evoaudit import config as config_mod
from evoaudit.cli.common import Adder


def cmd_new_method(args: argparse.Namespace) -> None:
    from evoaudit.methods.template import write_template

    try:
        written = write_template(args.name, Path(args.dir))
    except ValueError as exc:
        raise config_mod.ConfigError(f"new-method: {exc}") from None
    for path in written:
        print(path)
    print(
        f"install it with: pip install -e {written[0].parent}; then add {args.name} to 'methods' and "
        f"{args.name}, placebo-{args.name} to 'conditions' (docs/methods.md)"
    )


def _new_method_parser(sub: argparse._SubParsersAction, add: Adder) -> None:
    sp = sub.add_parser(
        "new-method", help="write a template package of a method of one's own (docs/methods.md)"
    )
    sp.set_defaults(func=cmd_new_method)
    sp.add_argument("name", help="the method's name, lower-case words joined by '-', e.g. my-memory")
    sp.add_argument("--dir", default=".", help="directory to write the package directory into")


def register(sub: argparse._SubParsersAction, add: Adder) -> None:
    """Add this group's commands to ``sub``."""
    for parser in (_new_method_parser,):
        parser(sub, add)
