"""Which configuration each stage depends on is answered by one function, config.stage_config: a change to a
key outside a stage's answer leaves its digest (rerun trigger, resume key) alone, a change inside moves it;
the default run's digests are those its results directory was written under; no rule hashes on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.config import STAGES, stage_config, stage_digest
from evoaudit.provenance import config_sha256

ROOT = Path(__file__).resolve().parents[2]


def _with(changes: dict[str, object]) -> config_mod.Config:
    raw: dict = {}
    for dotted, value in changes.items():
        node = raw
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return config_mod.from_dict(raw)


def _moved(changes: dict[str, object]) -> set[str]:
    base, changed = _with({}), _with(changes)
    return {s for s in STAGES if stage_digest(base, s) != stage_digest(changed, s)}


BANKING = {"suite", "acquire", "evolve", "evaluate"}


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        # The report's own settings rerun the report alone.
        ({"report.figures": False}, {"report", "config"}),
        # The optimizer shapes evolution only (and the write screens' judge, which it answers).
        ({"optimizer.temperature": 0.7}, {"evolve", "write_screen", "config"}),
        # A Banking goal: every Banking stage and the episode, no APEX stage.
        ({"suite.goals": ["injection_task_0"]}, BANKING | {"episode", "config"}),
        # How requests travel is no part of an episode's resume key, but the rules still rerun on it.
        ({"executor.concurrency": 3}, {"acquire", "evolve", "evaluate", "config"}),
        # The APEX worlds' size reruns the APEX stages and nothing of the Banking audit (the recorded
        # configuration hash holds suite.apex, so it moves).
        ({"suite.apex.scale": 0.25}, {"apex", "apex_attacks", "apex_probes", "apex_worlds", "config"}),
        # An attack switch does not change the worlds.
        ({"suite.apex.attacks.timer": True}, {"apex", "apex_attacks", "apex_probes", "config"}),
        # The judge reruns its own stage only (and the APEX report, which hashes the whole apex section).
        ({"apex.judge.temperature": 0.5}, {"apex_judge", "apex"}),
        # The simulator's planted poisoning rates: copying reruns evolution (and the poisoning extension's
        # own rules), the sleeper the agent's episodes; the whole-configuration hash leaves both out.
        ({"sim.poison_copy": {"distil": 0.5}}, {"evolve", "poisoning"}),
        ({"sim.poison_sleeper": 0.3}, {"acquire", "evaluate", "episode"}),
        # The seed is everyone's, but the worlds carry their own (suite.apex.seed).
        ({"seed": 7}, (set(STAGES) - {"suite", "apex_probes", "apex_worlds"})),
    ],
)
def test_a_change_moves_the_digests_of_exactly_the_stages_that_depend_on_it(change, moved):
    assert _moved(change) == moved


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        # An unused screen's settings rerun nothing but the whole-configuration hash.
        ({"write_defenses.llm_judge.threshold": 0.9}, {"config"}),
        # An enabled screen's settings rerun the screen and evolution.
        ({"write_defenses.instruction_rules.excerpt_chars": 80}, {"write_screen", "evolve", "config"}),
        # Another screen switched on likewise.
        (
            {"write_defenses.screens": ["instruction_rules", "llm_judge"]},
            {"write_screen", "evolve", "config"},
        ),
    ],
)
def test_a_write_screen_digest_sees_the_screens_and_the_enabled_screens_settings_only(change, moved):
    base = {"write_defenses.screens": ["instruction_rules"]}
    before, after = _with(base), _with({**base, **change})
    assert {s for s in STAGES if stage_digest(before, s) != stage_digest(after, s)} == moved


def test_one_apex_model_s_digest_ignores_another_model_and_the_categories():
    one = _with({"apex.models": [{"id": "a"}]})
    two = _with({"apex.models": [{"id": "a"}, {"id": "b"}], "apex.categories": ["c1"]})
    assert stage_digest(one, "apex", model="a") == stage_digest(two, "apex", model="a")
    assert stage_digest(one, "apex") != stage_digest(two, "apex")


def test_an_ablation_arm_hashes_its_own_ablation_and_an_unknown_one_is_refused():
    cfg = _with({"apex.ablations": [{"name": "hidden", "attacks": {"hidden_files": False}}]})
    assert stage_digest(cfg, "apex_attacks", ablation="hidden") != stage_digest(cfg, "apex_attacks")
    with pytest.raises(config_mod.ConfigError, match="no ablation named 'nope'"):
        stage_config(cfg, "apex_attacks", ablation="nope")
    with pytest.raises(ValueError, match="unknown stage 'nope'"):
        stage_config(cfg, "nope")


def test_a_password_in_a_url_reaches_no_stage_s_answer():
    cfg = _with({"executor.backend": "openai", "executor.base_url": "http://u:secret@127.0.0.1:9/v1"})
    for stage in STAGES:
        assert "secret" not in str(stage_config(cfg, stage))


# The default run's digests as its results directories were written: a change here reruns every existing
# run (and moves every resume key), so update these only on purpose, saying why.
DEFAULT_DIGESTS = {
    "suite": "b634d46801c2b156",
    "acquire": "0e17ae323fbc1323",
    "evolve": "5870fd3437966a36",
    "evaluate": "202c5b054b5b8469",
    "report": "09cd88cea541f93e",
    "apex": "73afce4b63610794",
    "apex_attacks": "2b82d522afcdc523",
    "apex_judge": "44d0002199c77ef0",
    "apex_probes": "3dc8374c2792175c",
    "apex_worlds": "ff56bf8baa0bb611",
}


def test_the_default_run_keeps_the_digests_its_results_were_written_under():
    cfg = config_mod.load(ROOT / "config" / "config.yaml")
    assert {s: stage_digest(cfg, s)[:16] for s in DEFAULT_DIGESTS} == DEFAULT_DIGESTS
    assert stage_digest(cfg, "apex", model="sim")[:16] == "aedbdf2433b82e3f"
    assert stage_digest(cfg, "episode") == "920d123a313117feb3a863526f8d3ef188d2cae983256d48297a88d6b21c16c8"
    assert config_sha256(cfg) == "dd7018fe3a6d13cfccc7c60786a3849636c045246888d615f9e745bfe7e30f53"


def test_no_rule_hashes_configuration_itself():
    # Every rerun trigger goes through get_stage_params (common.smk -> config.stage_digest); the transfer
    # rules hash the derived configuration they run under (report.transfer.derive_config), a file's content.
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        if smk.name != "transfer.smk":
            assert "sha256_json" not in text, smk.name
        for line in re.findall(r"^\s*cfg=.*$", text, flags=re.M):
            assert "get_stage_params(" in line, f"{smk.name}: {line.strip()}"
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert "evoaudit_config.stage_digest(CFG, stage" in common


def test_a_defended_shard_sees_its_own_defences_parameters_and_no_other_defences():
    base, changed = _with({}), _with({"defense_params.llm_monitor.max_benign_flag_rate": 0.1})
    # llm_monitor's calibration reruns its defended shards; no other shard moves.
    assert stage_digest(base, "evaluate", defense="llm_monitor") != stage_digest(
        changed, "evaluate", defense="llm_monitor"
    )
    for defense in (None, "spotlighting_with_delimiting"):
        assert stage_digest(base, "evaluate", defense=defense) == stage_digest(
            changed, "evaluate", defense=defense
        )
    assert stage_digest(base, "evaluate", defense="spotlighting_with_delimiting") == stage_digest(
        base, "evaluate"
    )
