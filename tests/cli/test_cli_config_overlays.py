"""A command reads the configuration the workflow ran with: ``--config`` given again lays each file over
the ones before it, as Snakemake merges its ``--configfile`` files, and the same checks stop it."""

from __future__ import annotations

import json

import pytest

from evoaudit import cli
from evoaudit import config as config_mod


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_overlays_merge_mappings_key_by_key_and_replace_lists_in_order(tmp_path):
    base = _write(tmp_path, "base.yaml", "lineages: [L1, L2]\nagent: {max_steps: 8}\nresults_dir: r-base\n")
    over = _write(tmp_path, "over.yaml", "lineages: [L3]\nagent: {time_limit_s: 50}\nresults_dir: r-over\n")

    cfg = config_mod.load([base, over])

    assert list(cfg.lineages) == ["L3"] and cfg.results_dir == "r-over"
    assert cfg.agent.max_steps == 8 and cfg.agent.time_limit_s == 50  # both files' keys of one mapping
    assert list(config_mod.load([over, base]).lineages) == ["L1", "L2"]  # the last file wins


def test_an_unknown_key_names_the_overlay_it_is_written_in(tmp_path, capsys):
    base = _write(tmp_path, "base.yaml", "lineages: [L1]\n")
    over = _write(tmp_path, "over.yaml", "agent: {max_stepz: 3}\n")

    assert cli.main(["validate-config", "--config", base, "--config", over]) == 2

    err = capsys.readouterr().err
    assert f"{base} + {over}" in err and f"(in {over})" in err and "max_steps" in err


def test_plan_and_progress_take_every_config_file_not_only_the_last(tmp_path, capsys):
    base = _write(tmp_path, "base.yaml", f"results_dir: {tmp_path / 'r-base'}\nlineages: [L1]\n")
    over = _write(tmp_path, "over.yaml", "methods: [static]\nconditions: [static]\napex: {enabled: false}\n")

    def acquire_jobs(argv):
        assert cli.main(["plan", "--json", *argv]) == 0
        (stage,) = [s for s in json.loads(capsys.readouterr().out)["stages"] if s["stage"] == "acquire"]
        return stage["jobs"]

    assert acquire_jobs(["--config", base, "--config", over]) == 1  # base's one lineage
    assert acquire_jobs(["--config", over, "--results", str(tmp_path / "r-over")]) == 3  # the default three

    args = cli.build_parser().parse_args(["progress", "--config", base, "--config", over])
    cli.fill_results_dir(args)
    assert args.results == str(tmp_path / "r-base")  # results_dir from the first file: the overlay keeps it


def test_a_command_refuses_a_defence_the_suite_cannot_run_without_a_selection(tmp_path, capsys):
    text = (
        "suite: {name: apex, goals: [c1]}\nmethods_params: {placebo: {goals: [c1]}}\n"
        "transfer: {enabled: false}\ndefenses: [tool_filter]\n"
    )
    path = _write(tmp_path, "apex.yaml", text)  # no suite.families or apex.tasks: no selection

    assert cli.main(["validate-config", "--config", path]) == 2

    assert f"{path}: defenses: 'tool_filter' does not run on suite 'apex'" in capsys.readouterr().err


def test_no_configuration_file_is_an_error_not_the_defaults():
    with pytest.raises(config_mod.ConfigError, match="no configuration file given"):
        config_mod.load([])


def test_a_directory_given_as_a_config_is_refused_naming_it(tmp_path, capsys):
    (tmp_path / "d").mkdir()

    assert cli.main(["validate-config", "--config", str(tmp_path / "d")]) == 2

    assert f"{tmp_path / 'd'}: cannot be read as a configuration file" in capsys.readouterr().err
