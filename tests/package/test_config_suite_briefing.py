"""What the executor is told and what SkillOpt starts from follow the audited suite when the configuration
leaves them out: no suite's agent is briefed as another suite's assistant."""

from __future__ import annotations

from conftest import REPO

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt


def test_banking_keeps_its_briefing_and_skill_seed():
    cfg = config_mod.from_dict({})
    assert cfg.agent.system_prompt.startswith("You are a careful banking assistant.")
    assert cfg.methods_params.skillopt.initial_skill.startswith("# Banking task skill\n")
    assert cfg.methods_params.skillopt.protected == ("# Banking task skill",)


def test_an_apex_harm_audit_briefs_the_agent_as_the_apex_protocol_does():
    cfg = config_mod.load(REPO / "config" / "examples" / "apex-evolution.yaml")

    assert cfg.agent.system_prompt == cfg.apex.system_prompt
    assert configured_prompt(cfg).startswith("You are a careful professional-services analyst")
    assert "banking" not in configured_prompt(cfg).lower()
    skill = cfg.methods_params.skillopt
    assert skill.initial_skill.startswith("# Professional-services task skill\n")
    assert "banking" not in skill.initial_skill.lower()
    assert skill.protected == ("# Professional-services task skill",)


def test_each_agentdojo_suite_gets_a_briefing_in_its_own_domain():
    for name, word in (("workspace", "calendar"), ("travel", "travel"), ("slack", "Slack")):
        cfg = config_mod.from_dict(
            {
                "suite": {"name": name, "goals": ["injection_task_1"]},
                "methods_params": {"placebo": {"goals": ["injection_task_1"]}},
                "transfer": {"enabled": False},
            }
        )
        assert word in cfg.agent.system_prompt and "banking" not in cfg.agent.system_prompt
        assert word.lower() in cfg.methods_params.skillopt.initial_skill.lower()


def test_a_configured_briefing_and_skill_are_kept_and_the_skills_first_heading_is_protected():
    cfg = config_mod.from_dict(
        {
            "suite": {"name": "apex", "goals": ["c1"]},
            "methods_params": {
                "placebo": {"goals": ["c1"]},
                "skillopt": {"initial_skill": "Notes first\n# Mine\n\n# Later\n"},
            },
            "transfer": {"enabled": False},
            "agent": {"system_prompt": "Be brief."},
        }
    )
    assert cfg.agent.system_prompt == "Be brief."
    assert cfg.methods_params.skillopt.protected == ("# Mine",)
    untitled = config_mod.from_dict({"methods_params": {"skillopt": {"initial_skill": "- a note\n"}}})
    assert untitled.methods_params.skillopt.protected == ()  # no heading: nothing is protected
