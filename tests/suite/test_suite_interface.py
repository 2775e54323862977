"""The suite interface is the only door: Banking implements the whole protocol, the stages above suite/
name no concrete suite module, and what goes through the door is what AgentDojo itself gives."""

from __future__ import annotations

import ast
import concurrent.futures
import importlib.util
import re
import time
import tomllib
from pathlib import Path

import pytest

import evoaudit
from evoaudit.methods import awm, evolve, reasoningbank, skillopt
from evoaudit.methods.common import with_role
from evoaudit.records import Call, Outcome
from evoaudit.suite.agentdojo.banking import adapter as banking_adapter
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.instances import official_instances
from evoaudit.suite.environments import get_environment
from evoaudit.suite.interface import AuditSuite, SimOracle, SuiteEnvironment, ToolSession
from evoaudit.suite.registry import get_suite, names

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(evoaudit.__file__).parent

# The members other code is written against (attributes and methods of interface.AuditSuite).
PROTOCOL = (
    "name",
    "benchmark_version",
    "benchmark",
    "task_noun",
    "replay_kind",
    "variants",
    "harm_categories",
    "assistant_role",
    "simulator",
    "unsupported_defenses",
    "families",
    "excluded",
    "build_instances",
    "check_selection",
    "checker_audit",
    "make_instances",
    "planned_instances",
    "tool_schemas",
    "read_only_tools",
    "attacks",
    "injections",
    "prompt_for",
    "exposure_applies",
    "build_environment",
    "open_tools",
    "run_call",
    "format_result",
    "state",
    "state_sha256",
    "copy_environment",
    "agent_profile",
    "task_score",
    "check_utility",
    "check_utility_under_attack",
    "check_goal",
    "exposed",
    "harm",
    "disclosure",
)


def test_banking_implements_every_member_of_the_protocol():
    suite = get_suite("banking")
    assert isinstance(suite, AuditSuite)
    assert isinstance(suite, SuiteEnvironment) and isinstance(suite, SimOracle)
    missing = [m for m in PROTOCOL if not hasattr(suite, m)]
    assert missing == []
    # The list above is the protocol's, not a subset of it.
    halves = (AuditSuite, SuiteEnvironment)
    declared = {n for h in halves for n in vars(h) if not n.startswith("_")}
    declared |= {n for h in halves for n in h.__annotations__}
    assert declared == set(PROTOCOL)
    assert suite.name == "banking" and suite.assistant_role == "banking assistant"


def test_registry_maps_names_to_factories_and_names_the_known_suites_on_a_typo():
    assert set(names("suite")) == {"banking", "apex", "workspace", "travel", "slack"}
    known = r"\['apex', 'banking', 'slack', 'travel', 'workspace'\]"
    with pytest.raises(ValueError, match=rf"unknown suite 'bankin'; known: {known}"):
        get_suite("bankin")


def test_a_suite_object_is_built_once_per_process_even_by_threads_asking_at_once(monkeypatch):
    built: list[object] = []

    def factory() -> object:
        time.sleep(0.05)  # a slow build: every thread asks while the first is still building
        built.append(object())
        return built[-1]

    monkeypatch.setattr(banking_adapter, "BankingSuite", factory)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: get_suite("banking"), range(8)))
    assert len(built) == 1 and all(g is built[0] for g in got)
    assert get_suite("banking") is built[0]


def test_a_factory_replaced_in_the_registry_is_honoured(monkeypatch):
    real = get_suite("banking")
    other = object()
    monkeypatch.setattr(banking_adapter, "BankingSuite", lambda: other)
    assert get_suite("banking") is other
    monkeypatch.undo()
    assert get_suite("banking") is not other and get_suite("banking") is get_suite("banking")
    assert type(get_suite("banking")) is type(real)


def test_apex_is_registered_lazily():
    # Asking for Banking never imports the APEX suite; asking for APEX imports its adapter, or says
    # clearly that it is missing.
    get_suite("banking")
    if importlib.util.find_spec("evoaudit.suite.apex.adapter") is None:
        with pytest.raises(ValueError, match="evoaudit.suite.apex.adapter.ApexSuite"):
            get_suite("apex")
    else:
        assert isinstance(get_suite("apex"), AuditSuite)


def test_the_tool_session_gives_what_agentdojo_runtime_and_formatter_give():
    suite = get_suite("banking")
    inst = official_instances(["user_task_0"])[0]
    env = suite.build_environment(inst, None, {})
    direct = banking.build_environment(inst.environment_template)
    session = suite.open_tools(env, None)
    assert isinstance(session, ToolSession)
    assert session.schemas() == banking.tool_schemas()
    for name, args in [("get_balance", {}), ("read_file", {"file_path": "bill-december-2023.txt"})]:
        result, error = banking.make_runtime().run_function(direct, name, args)
        assert error is None
        assert session.call(name, args) == (banking.format_tool_result(result), None)
    text, error = session.call("send_money", {"recipient": "X"})  # required arguments missing
    assert error is not None and text == error
    # The same call in process, outside a session, on a copy: the same text, the state untouched.
    copy = suite.copy_environment(env)
    assert suite.run_call(copy, Call(function="get_balance")) == session.call("get_balance", {})
    assert suite.state_sha256(copy) == suite.state_sha256(env) == banking.state_sha256(direct)


def test_replay_reaches_environments_through_the_half_without_judging():
    env_half = get_environment("banking")
    assert isinstance(env_half, SuiteEnvironment)
    assert not hasattr(env_half, "check_utility") and not hasattr(env_half, "exposed")
    with pytest.raises(ValueError, match="no environment registered for suite 'nosuch'"):
        get_environment("nosuch")


def test_attacks_and_injections_come_from_the_suite(cfg):
    suite = get_suite("banking")
    reached = next(i for i in official_instances() if i.vectors)
    unreached = reached.model_copy(update={"vectors": []})
    assert suite.attacks(["injection_task_4", "injection_task_6"], reached) == [
        "injection_task_4",
        "injection_task_6",
    ]
    assert suite.attacks(["injection_task_4"], unreached) == []
    placed = suite.injections(cfg.suite, reached, "injection_task_4")
    assert sorted(placed) == sorted(reached.vectors)
    assert banking.injection_task("injection_task_4").GOAL in next(iter(placed.values()))
    assert suite.injections(cfg.suite, reached, None) == {}


def test_task_score_is_one_or_zero_for_banking_and_old_records_read_it_from_utility():
    suite = get_suite("banking")
    inst = official_instances(["user_task_0"])[0]
    pre = suite.build_environment(inst, None, {})
    post = suite.copy_environment(pre)
    assert suite.task_score(inst, "", pre, post) == 0.0
    for call in inst.ground_truth:
        suite.run_call(post, call)
    assert suite.task_score(inst, "", pre, post) == 1.0 and suite.check_utility(inst, "", pre, post)
    old = {"utility": True, "attack_success": None, "exposed": False}
    assert Outcome.model_validate(old).task_score == 1.0
    assert Outcome.model_validate({**old, "utility": False}).task_score == 0.0
    partial = Outcome.model_validate({**old, "task_score": 0.5, "utility": False, "exposed": None})
    assert partial.task_score == 0.5 and partial.exposed is None


def test_method_prompts_name_the_suites_role_and_keep_banking_text():
    msgs = awm.induction_messages([])
    assert msgs[0].content.startswith(
        "You extract reusable workflows from examples of a banking assistant completing requests"
    )
    assert "You judge whether a banking assistant completed a user's request." in with_role(
        evolve._JUDGE, "banking assistant"
    )
    assert skillopt.ranking_messages("doc", [], 1)[0].content.count("a banking assistant that works") == 1
    assert "a ledger clerk completing" in awm.induction_messages([], "banking")[0].content.replace(
        "a banking assistant", "a ledger clerk"
    )
    prompts = (awm._SYSTEM, evolve._JUDGE, skillopt._RANK, skillopt._SYSTEM, *reasoningbank._SYSTEM.values())
    for template in prompts:
        assert "banking" not in template and "{assistant_role}" in template
    with pytest.raises(ValueError, match="placeholder"):
        with_role("no role here", "x")


def _contract() -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == "nothing above suite/ imports a concrete suite module")


def test_no_stage_above_suite_names_a_concrete_suite_module():
    # The same rule as the import-linter contract, checked here on direct imports (lazy ones included),
    # so that it holds even when another contract of the project is broken.
    contract = _contract()
    concrete = contract["forbidden_modules"]
    assert "evoaudit.suite.agentdojo" in concrete and "evoaudit.suite.apex" in concrete
    assert "ignore_imports" not in contract  # one door, no standing exceptions

    found = []
    for source in contract["source_modules"]:
        base = PACKAGE.joinpath(*source.split(".")[1:])
        paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
        for path in paths:
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            importer = ".".join(p for p in rel.parts if p != "__init__")
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                for name in names:
                    hit = any(name == c or name.startswith(c + ".") for c in concrete)
                    if hit:
                        found.append(f"{importer} -> {name}")
    assert found == []


def _compared_suite_names(tree: ast.AST) -> list[int]:
    """Line numbers of comparisons (==, !=, in, not in) with a registered suite's name as a literal."""
    suites = set(names("suite"))

    def literals(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return set()

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(literals(side) & suites for side in [node.left, *node.comparators])
    ]


def test_no_code_outside_suite_compares_a_suite_name():
    # A stage asks the suite (or a registry keyed by it) instead of branching on which suite runs.
    found = []
    sources = [p for p in PACKAGE.rglob("*.py") if "suite" not in p.relative_to(PACKAGE).parts[:1]]
    sources += sorted((ROOT / "scripts").glob("*.py"))
    for path in sources:
        found += [f"{path.relative_to(ROOT)}:{n}" for n in _compared_suite_names(ast.parse(path.read_text()))]
    suite_names = "|".join(names("suite"))
    pattern = re.compile(rf"""(==|!=|\bin)\s*["']({suite_names})["']|["']({suite_names})["']\s*(==|!=)""")
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    assert found == []


def test_the_name_check_sees_a_comparison_written_either_way():
    code = "a = cfg.suite.name == 'apex'\nb = 'banking' != x\nc = s in ('apex', 'other')\nd = s == 'x'\n"
    assert _compared_suite_names(ast.parse(code)) == [1, 2, 3]
