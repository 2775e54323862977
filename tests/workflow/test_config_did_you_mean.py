"""A misspelled configuration key is reported with the nearest allowed key and the file it is in, by
`evoaudit validate-config` and by the workflow."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import cli
from evoaudit import config as config_mod


def test_validate_config_suggests_the_key_and_names_the_file(tmp_path, capsys):
    bad = tmp_path / "mine.yaml"
    bad.write_text("executr:\n  backend: sim\nsuite:\n  famlies: [user_task_0]\nzzzz: 1\n")
    assert cli.main(["validate-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "executr: unknown key `executr` (in " in err and "did you mean `executor`?" in err, err
    assert "suite.famlies: unknown key `famlies` (in " in err and "did you mean `families`?" in err, err
    assert "mine.yaml" in err
    # Nothing near: no guess, the allowed keys.
    assert "zzzz: unknown key `zzzz`" in err and "remove it or correct its name" in err, err


def test_the_key_is_traced_to_the_file_it_came_from():
    raw = {"apex": {"models": [{"id": "m", "executr": {}}]}}
    with pytest.raises(config_mod.ConfigError, match=r"apex\.models\.0\.executr: .*did you mean `executor`"):
        config_mod.from_dict(raw)


def test_the_workflow_suggests_the_key_and_names_the_configfile(tmp_path):
    work = copy_workflow(tmp_path)
    (work / "config" / "extra.yaml").write_text("executr:\n  backend: sim\n")
    proc = snakemake(work, "-n", "--configfile", "config/extra.yaml", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    want = "executr: unknown key `executr` (in config/extra.yaml); did you mean `executor`?"
    assert want in out, out[-3000:]
    # A key given with --config is not in any file: said so.
    proc = snakemake(work, "-n", "--config", "seal={'verify_sampel': 1}", check=False)
    out = proc.stdout + proc.stderr
    assert "seal.verify_sampel: unknown key `verify_sampel` (from --config on the command line)" in out, out[
        -3000:
    ]
    assert "did you mean `verify_sample`?" in out


def test_snakemake_reads_the_default_configfile_into_the_list(tmp_path):
    # config/config.yaml itself is named when the key is written there.
    work = copy_workflow(tmp_path)
    path = Path(work / "config" / "config.yaml")
    path.write_text(path.read_text() + "\nlineagez: [L1]\n")
    proc = snakemake(work, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert "lineagez: unknown key `lineagez` (in config/config.yaml); did you mean `lineages`?" in out, out[
        -3000:
    ]
