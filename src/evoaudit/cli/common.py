"""What every command shares: the configuration it loads (once), and results paths that default to the
configuration's ``results_dir``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from evoaudit import config as config_mod
from evoaudit.paths import Layout

RESULTS_DEFAULT = " (default: the configuration's results_dir)"
RESULTS_HELP = "results directory" + RESULTS_DEFAULT
DEFAULT_CONFIG = "config/config.yaml"
#: The results layout under the ``{results}`` placeholder, which ``fill_results_dir`` fills in.
AT = Layout("{results}")

# add(name, func, help) -> the command's parser, with --config already on it.
Adder = Callable[[str, Callable[[argparse.Namespace], object], str], argparse.ArgumentParser]


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config FILE``, repeatable: the files are laid over each other in order, as Snakemake merges its
    ``--configfile`` files. Unlike Snakemake, nothing is implied under them: a run whose config/config.yaml
    differs from the defaults names it first."""
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help=f"configuration file (YAML or JSON; default {DEFAULT_CONFIG}); give it again for each overlay, "
        "in the order of snakemake's --configfile (config/config.yaml is not implied under them)",
    )


def config_files(args: argparse.Namespace) -> list[str]:
    """The configuration files a command was given, in order (the default file when none)."""
    return list(getattr(args, "config", None) or [DEFAULT_CONFIG])


def config_source(args: argparse.Namespace) -> str:
    """How errors name the configuration: its files, joined by ' + '."""
    return " + ".join(config_files(args))


def fill_results_dir(args: argparse.Namespace) -> None:
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
        root = config_mod.load(config_files(args)).results_dir if hasattr(args, "config") else "results"
        if hasattr(args, "results"):
            args.results = root
    for k, v in templated.items():
        fill = lambda x: x.replace("{results}", root.rstrip("/")) if isinstance(x, str) else x  # noqa: E731
        setattr(args, k, [fill(x) for x in v] if isinstance(v, list) else fill(v))


def load_cfg(args: argparse.Namespace) -> config_mod.Config:
    cfg = config_mod.load(config_files(args))
    if cfg.suite.families is not None or cfg.apex.tasks is not None or cfg.defenses:
        from evoaudit.suite.registry import check_selection  # loads a suite: only for a selection or defences

        check_selection(cfg, config_source(args))
    if getattr(args, "no_cache", False):  # evoaudit --no-cache: the response cache is not read or written
        cfg = config_mod.without_cache(cfg)
    return cfg
