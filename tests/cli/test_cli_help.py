"""The command line in the ecosystem's habits: every option of every (sub)command says what it does, and
`evoaudit apex` is one subcommand per action, each with only its own options."""

from __future__ import annotations

import argparse

import pytest

from evoaudit import cli
from evoaudit.suite.apex.generate import TASK_IDS


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
    cli._fill_results_dir(args)
    assert args.results == "results-cues-off"
    args = cli.build_parser().parse_args(["progress", "--results", "elsewhere"])
    cli._fill_results_dir(args)
    assert args.results == "elsewhere"
