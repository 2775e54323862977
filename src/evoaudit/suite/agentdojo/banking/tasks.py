"""Adapter over AgentDojo's own Banking suite: environment, tools, tasks and attack.

Everything here is AgentDojo's real code used as a library; evoaudit adds only the glue that lets a
variant carry its own fixture (an environment template) and lets config name the attack's user and model.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

import yaml
from agentdojo.attacks.base_attacks import FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.default_suites.v1.banking.task_suite import BankingEnvironment
from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.task_suite.task_suite import TaskSuite, read_suite_file

from evoaudit.suite.agentdojo import toolkit
from evoaudit.suite.agentdojo.banking.poison import poison_task

# libyaml's safe loader when PyYAML was built with it: the same data, several times faster than the
# pure-Python loader, which dominated an episode's CPU time
# (tests/suite/agentdojo/test_suite_yaml_speed.py pins equality).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUITE_NAME = "banking"
BENCHMARK_VERSION = "v1.2.2"

# Tools that only read state; a call to one of them is a "read call" in the interface diagnostics.
READ_ONLY_TOOLS = frozenset(
    {
        "get_iban",
        "get_balance",
        "get_most_recent_transactions",
        "get_scheduled_transactions",
        "read_file",
        "get_user_info",
    }
)


@functools.cache
def load_suite(version: str = BENCHMARK_VERSION) -> TaskSuite[BankingEnvironment]:
    return get_suite(version, SUITE_NAME)


def official_environment_template() -> str:
    """The suite's fixture as YAML text with its ``{vector}`` placeholders, as AgentDojo ships it."""
    return read_suite_file(SUITE_NAME, "environment.yaml", None)


@functools.cache
def vector_defaults() -> dict[str, str]:
    return load_suite().get_injection_vector_defaults()


# A variant template may replace a vector's default text (what the placeholder holds when nothing is
# injected) with a first line ``# evoaudit-vector-defaults: {json}``. It is a YAML comment, so the
# template stays the suite's YAML; the bill families use it to keep the bill's own lines in the fixture
# and make the bill vector an append point, as the landlord vectors already are.
DEFAULTS_HEADER = "# evoaudit-vector-defaults: "


def split_template(template: str) -> tuple[dict[str, str], str]:
    """The template's own vector defaults (possibly none) and its YAML body."""
    if not template.startswith(DEFAULTS_HEADER):
        return {}, template
    header, _, body = template.partition("\n")
    overrides = json.loads(header[len(DEFAULTS_HEADER) :])
    unknown = set(overrides) - set(vector_defaults())
    if unknown:
        raise ValueError(f"environment template header names unknown vector(s) {sorted(unknown)}")
    return overrides, body


def with_vector_defaults(template: str, overrides: dict[str, str]) -> str:
    """Prefix ``template`` (which must not have a header yet) with its own vector defaults."""
    if template.startswith(DEFAULTS_HEADER):
        raise ValueError("environment template already carries a vector-defaults header")
    return DEFAULTS_HEADER + json.dumps(overrides, sort_keys=True) + "\n" + template


def build_environment(template: str, injections: dict[str, str] | None = None) -> BankingEnvironment:
    """Fill the placeholders and parse, the way AgentDojo's ``load_and_inject_default_environment`` does.

    Doing it at the text level keeps AgentDojo's serialisation effects (YAML folds newlines inside
    quoted scalars), which exposure detection has to live with.
    """
    injections = injections or {}
    unknown = set(injections) - set(vector_defaults())
    if unknown:
        raise ValueError(f"unknown injection vector(s) {sorted(unknown)}; known: {sorted(vector_defaults())}")
    overrides, body = split_template(template)
    text = body.format(**(vector_defaults() | overrides | injections))
    return BankingEnvironment.model_validate(_parsed(text))


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> Any:
    # Every episode of an instance and goal fills in the same text; parsing it is most of building the
    # environment. Validation copies the containers, so episodes never share (or mutate) this object.
    return yaml.load(text, Loader=_SAFE_LOADER)


def copy_environment(env: BankingEnvironment) -> BankingEnvironment:
    """An independent copy of ``env``, equal field for field and type for type to a deep copy, several
    times faster than ``model_copy(deep=True)`` (which walks the state in Python).

    Validation of the dumped state rebuilds every model and container. It is exact because every value
    in a Banking environment is already what validation makes of it: the fixture is parsed by validation
    (``build_environment``), and AgentDojo's runtime validates a tool's arguments against their annotated
    types before the tool writes them into the state; every field is required, so the set fields are all
    of them on both sides (tests/suite/agentdojo/test_suite_banking_copy.py pins this on episodes' states)."""
    return BankingEnvironment.model_validate(env.model_dump())


def make_runtime() -> FunctionsRuntime:
    return FunctionsRuntime(load_suite().tools)


@functools.cache
def tool_schemas() -> tuple[dict[str, Any], ...]:
    """OpenAI function-calling schemas for the suite's tools, from AgentDojo's own parameter models."""
    return toolkit.tool_schemas(load_suite())


def format_tool_result(result: Any) -> str:
    """The text a model sees for a tool result: AgentDojo's own YAML formatter, byte for byte."""
    return toolkit.format_tool_result(result)


# AgentDojo's lookup by id rebuilds the suite's table of version-compatible tasks on every call; the task
# objects it returns are the suite's own, the same each time, so one lookup per id is kept.
@functools.cache
def user_task(family: str) -> BaseUserTask[BankingEnvironment]:
    return load_suite().get_user_task_by_id(family)


def user_task_ids() -> list[str]:
    return sorted(load_suite().user_tasks, key=lambda t: int(t.rsplit("_", 1)[1]))


@functools.cache
def injection_task(goal: str) -> BaseInjectionTask[BankingEnvironment]:
    # The poisoning extension's persistence goals first (poison.py), then AgentDojo's own.
    return poison_task(goal) or load_suite().get_injection_task_by_id(goal)


def injection_task_ids() -> list[str]:
    return sorted(load_suite().injection_tasks, key=lambda t: int(t.rsplit("_", 1)[1]))


@functools.cache
def make_attack(user_name: str, model_name: str) -> ImportantInstructionsAttack:
    """AgentDojo's ``important_instructions`` attack with names from config
    (``toolkit.important_instructions``). Cached: building one re-reads the suite's vector file, and the
    attack holds no per-episode state."""
    return toolkit.important_instructions(load_suite(), user_name, model_name)


def injection_text(attack: FixedJailbreakAttack, goal: str, prompt: str) -> str:
    """The text the attack places in every vector the instance reaches."""
    return attack.jailbreak.format(
        goal=injection_task(goal).GOAL, user=attack.user_name, model=attack.model_name, task=prompt
    )


def state_dict(env: BankingEnvironment) -> dict[str, Any]:
    return env.model_dump(mode="json")


def state_sha256(env: BankingEnvironment) -> str:
    blob = json.dumps(state_dict(env), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()
