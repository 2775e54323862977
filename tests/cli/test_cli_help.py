"""The command line in the ecosystem's habits: every option of every (sub)command says what it does, and
`evoaudit apex` is one subcommand per action, each with only its own options."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from evoaudit import cli
from evoaudit.suite.apex.worlds.generate import TASK_IDS


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_option_and_argument_of_every_command_has_help():
    bare = [
        " ".join(path) + " " + (a.option_strings[0] if a.option_strings else a.dest)
        for path, a in _walk(cli.build_parser(), ("evoaudit",))
        if not a.help
    ]
    assert not bare, f"options without help: {bare}"


def test_apex_tasks_lists_every_task_id(capsys):
    assert cli.main(["apex", "tasks"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(TASK_IDS) and len(listed) == 15


@pytest.mark.parametrize(
    ("argv", "foreign"),
    [
        (["apex", "build", "--transport", "http"], "--transport"),
        (["apex", "serve", "t", "--rebuild"], "--rebuild"),
    ],
)
def test_an_apex_action_refuses_another_actions_option(argv, foreign, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(argv)
    assert foreign in capsys.readouterr().err


def test_progress_reads_the_results_dir_of_the_configuration_it_is_given():
    from conftest import REPO

    args = cli.build_parser().parse_args(
        ["progress", "--config", str(REPO / "config/examples/cues-off.yaml")]
    )
    cli.fill_results_dir(args)
    assert args.results == "results-cues-off"
    args = cli.build_parser().parse_args(["progress", "--results", "elsewhere"])
    cli.fill_results_dir(args)
    assert args.results == "elsewhere"


def test_the_command_runs_again_under_the_workflows_hash_seed(monkeypatch):
    # AgentDojo's calendar orders participants through a set of strings: the command must see the order
    # the workflow's jobs (PYTHONHASHSEED=0) see.
    seen = {}

    def execve(path, args, env):
        seen.update(path=path, args=args, seed=env["PYTHONHASHSEED"])
        raise SystemExit(0)

    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setenv("PYTHONHASHSEED", "random")
    monkeypatch.setattr(sys, "argv", ["evoaudit", "plan", "--help"])
    with pytest.raises(SystemExit):
        cli.main()
    assert seen["seed"] == "0" and seen["path"] == sys.executable
    assert seen["args"][-2:] == ["plan", "--help"]
    # Under the seed already (the workflow's jobs, or after the re-run) nothing runs again.
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    seen.clear()
    with pytest.raises(SystemExit):
        cli.main()
    assert seen == {}


def test_every_attack_id_the_apex_help_names_is_in_the_default_attack_set():
    import re

    from evoaudit.suite.apex.attacks import stealth
    from evoaudit.suite.apex.worlds.generate import build_task

    helps = " ".join(a.help or "" for _, a in _walk(cli.build_parser(), ("evoaudit",)))
    named = set(re.findall(r"\bc\d[a-z]*\.[a-z_]+\.\d+\b", helps))
    assert named, "the help names no example attack id"
    tasks = [build_task(t, "v0", 0, 0.05) for t in sorted({i.split(".")[1] for i in named})]
    ids = {a.attack_id for a in stealth.reference_attacks(tasks)}
    assert named <= ids, sorted(named - ids)


def test_output_piped_to_a_reader_that_stops_early_ends_quietly():
    import subprocess

    # `evoaudit validate-config | head -1`: the reader is gone before the resolved config is written (closed
    # at once here, while the command is still importing, so every write meets a closed pipe).
    proc = subprocess.Popen(
        [sys.executable, "-m", "evoaudit.cli", "validate-config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141), err
    assert "Traceback" not in err and "BrokenPipeError" not in err
