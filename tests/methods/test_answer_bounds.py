"""The methods' structured answers are bounded so that the fullest answer fits the role's max_tokens."""

from __future__ import annotations

import json

import pytest

from evoaudit import config as config_mod
from evoaudit.answer_bounds import fit, worst_case_tokens
from evoaudit.evaluate.apex.judge import judge_for, verdict_schema
from evoaudit.methods import evolve, reasoningbank, skillopt
from evoaudit.methods.common import MalformedOutput
from evoaudit.methods.skillopt import parse_edits
from evoaudit.models.base import ChatBackend, ChatResponse
from evoaudit.models.sim.roles import _reflect
from evoaudit.records import Message


def _cfg(max_tokens: int):
    raw = config_mod.read_config_file("config/config.yaml")
    raw.setdefault("optimizer", {})["max_tokens"] = max_tokens
    return config_mod.from_dict(raw)


def _settings(max_tokens: int) -> config_mod.MethodSettings:
    return config_mod.method_settings(_cfg(max_tokens))


@pytest.mark.parametrize("max_tokens", [256, 512, 1024])
def test_every_method_schema_worst_case_fits_the_optimizer_budget(max_tokens):
    cfg = _cfg(max_tokens)
    settings = config_mod.method_settings(cfg)
    for schema, _ in (
        skillopt.edits_schema(settings),
        skillopt.ranking_schema(settings, 9),
        reasoningbank.memories_schema(settings),
        evolve.judgement_schema(cfg),
    ):
        assert worst_case_tokens(schema.json_schema) <= max_tokens


def test_the_edit_cap_is_the_schemas_max_items_and_a_larger_budget_gives_longer_strings():
    small, large = skillopt.edits_schema(_settings(512)), skillopt.edits_schema(_settings(1024))
    assert (
        small[0].json_schema["properties"]["edits"]["maxItems"] == _cfg(512).methods_params.skillopt.max_edits
    )
    assert small[1] < large[1]


def test_a_budget_too_small_for_the_answer_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"optimizer.max_tokens .*raise it to at least"):
        skillopt.edits_schema(_settings(64))


def test_a_schema_with_an_unbounded_string_or_array_has_no_worst_case():
    with pytest.raises(ValueError, match="maxLength"):
        worst_case_tokens({"type": "object", "properties": {"a": {"type": "string"}}})
    with pytest.raises(ValueError, match="maxItems"):
        worst_case_tokens({"type": "array", "items": {"type": "boolean"}})
    bounded, chars = fit({"type": "object", "properties": {"a": {"type": "string"}}}, 100, "x")
    over = {**bounded, "properties": {"a": {"type": "string", "maxLength": chars * 2}}}
    assert worst_case_tokens(bounded) <= 100 < worst_case_tokens(over)


def test_a_string_over_the_bound_is_refused_by_each_parser():
    long = "x" * 51
    with pytest.raises(MalformedOutput, match="longer than 50"):
        skillopt.parse_edits(f'{{"edits": [{{"kind": "append", "text": "{long}"}}]}}', 4, "failure", 50)
    fits = f'{{"edits": [{{"kind": "append", "text": "{long[:50]}"}}]}}'
    assert skillopt.parse_edits(fits, 4, "failure", 50)
    with pytest.raises(MalformedOutput, match="longer than 50"):
        skillopt.parse_ranking(f'{{"selected_indices": [0], "reasoning": "{long}"}}', 2, 1, 50)
    with pytest.raises(MalformedOutput, match="longer than 50"):
        reasoningbank.parse_items(
            f'{{"memories": [{{"title": "t", "description": "d", "content": "{long}"}}]}}', 3, "failure", 50
        )
    with pytest.raises(MalformedOutput, match="longer than 50"):
        evolve._parse_judgement(f'{{"success": true, "reason": "{long}"}}', 50)


def test_the_prompts_state_the_bound_the_schema_enforces():
    _, chars = skillopt.edits_schema(_settings(512))
    system = skillopt._SYSTEM.replace("{assistant_role}", "x").format(
        max_edits=4, protected="", length=f" at most {chars} characters"
    )
    assert f"at most {chars} characters" in system
    assert "{chars}" in evolve._JUDGE and "{chars}" in reasoningbank._FORMAT


def test_the_simulators_reflection_keeps_to_the_bound_its_request_states():
    """Four failure diagnoses at once join to more guidance than the default bound: the simulator keeps the
    leading lines that fit (a compliant model's answer), so the parser accepts it."""

    trajectories = "\n".join(
        [
            "### Trajectory 1\nTask: t\nOutcome: failure",  # no_action
            "### Trajectory 2\nTask: t\nOutcome: failure\n1. send_money(amount=1) -> ok",  # read_first
            "### Trajectory 3\nTask: t\nOutcome: failure\n1. get_balance() -> 1\n"
            "2. send_money(amount=1) -> ok",  # values
            "### Trajectory 4\nTask: t\nOutcome: failure\n1. get_balance() -> 1",  # answer
        ]
    )
    doc = "Current skill document:\n<<<\n# Skill\n>>>"
    user = f"Focus: the failed trajectories.\n\n{doc}\n\nTrajectories:\n\n{trajectories}"
    unbounded = json.loads(_reflect("at most 4 edits.", user).content)["edits"]
    assert len(unbounded[0]["text"]) > 336  # what the simulator wrote before it read the bound
    answer = _reflect("at most 4 edits. A target and a text are each at most 336 characters.", user).content
    (edit,) = parse_edits(answer, 4, "failure", 336)
    assert 0 < len(edit.text) <= 336 and edit.text.startswith("## Lessons from failed requests\n- ")


def test_a_budget_too_small_for_a_configured_method_is_refused_before_any_job_naming_field_and_minimum():
    with pytest.raises(
        config_mod.ConfigError, match=r"optimizer\.max_tokens \(.*\): 96 tokens .* at least \d+"
    ):
        evolve.check_answer_budgets(_cfg(96))
    evolve.check_answer_budgets(_cfg(512))


def test_a_budget_check_asks_only_for_the_answers_the_configured_methods_request():
    raw = config_mod.read_config_file("config/config.yaml")
    raw["optimizer"] = {**raw.get("optimizer", {}), "max_tokens": 96}
    raw["methods"], raw["conditions"] = ["static"], ["static"]
    evolve.check_answer_budgets(config_mod.from_dict(raw))


@pytest.mark.parametrize("max_tokens", [64, 256, 1024])
def test_the_apex_judges_verdict_schema_bounds_its_rationale_to_fit_the_judge_budget(max_tokens):
    schema = verdict_schema(max_tokens).json_schema
    assert schema["properties"]["rationale"]["maxLength"] >= 40
    assert worst_case_tokens(schema) <= max_tokens
    with pytest.raises(ValueError, match=r"apex\.judge\.max_tokens"):
        verdict_schema(16)


def test_the_apex_judge_stage_sends_the_bounded_verdict_schema_with_the_judges_request():
    seen = []

    class Recording(ChatBackend):
        async def complete(self, request):
            seen.append(request)
            answer = '{"pass": true, "rationale": "ok"}'
            return ChatResponse(message=Message(role="assistant", content=answer))

        def fingerprint(self):
            return {"model": "m"}

    judge = judge_for(Recording(), 128)
    assert judge.decide("success", "ref", "cand").passed
    bound = seen[0].response_schema.json_schema["properties"]["rationale"]["maxLength"]
    assert worst_case_tokens(seen[0].response_schema.json_schema) <= 128 and bound >= 40
