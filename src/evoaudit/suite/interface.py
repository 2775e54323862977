"""What a suite must provide to be audited: the one door between the stages above and a concrete suite.

Stages above the suite layer (agent, evaluate, replay, report, methods, models) reach a suite only through
``registry.get_suite(name)`` and this protocol; they never import a concrete suite module (an import-linter
contract checks it). Environments are opaque objects the suite's own tools act on; instances are
``records.Instance`` rows whose ``predicate`` and ``environment_template`` the suite interprets. An attack is
an id the suite resolves: an injection goal for Banking, a frozen attack instance for APEX-Harm.
``SuiteEnvironment`` is the half without judging, the only part replay may use (``environments.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from evoaudit.records import Call, FileEffect, Instance, Message

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig, SuiteView


def select_ids(
    known: Sequence[str], chosen: Sequence[str] | None, field: str, excluded: dict[str, str] | None = None
) -> list[str]:
    """The ids of ``known`` (in its order) that a configured selection ``chosen`` keeps; all of them when
    ``chosen`` is None. An id the suite does not know raises ValueError naming ``field`` and the valid ids
    (an excluded one with the reason it was excluded)."""
    if chosen is None:
        return list(known)
    excluded = excluded or {}
    unknown = [c for c in chosen if c not in known]
    if unknown:
        why = "; ".join(f"{c} is excluded: {excluded[c]}" for c in unknown if c in excluded)
        raise ValueError(
            f"{field}: {unknown} are not ids of the suite"
            + (f" ({why})" if why else "")
            + f"; valid ids: {', '.join(known)} (or leave {field} out, or null, for all)"
        )
    keep = set(chosen)
    return [k for k in known if k in keep]


class PlannedInstance(NamedTuple):
    """What ``evoaudit plan`` counts of one instance: its variant, its split, and whether an attack can
    reach it."""

    variant: str
    split: str
    attackable: bool


@runtime_checkable
class ToolSession(Protocol):
    """The tools of one environment as a model reaches them (in process, or through an MCP server)."""

    def schemas(self) -> tuple[dict[str, Any], ...]:
        """OpenAI function-calling schemas of the tools offered in this session."""
        ...

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        """Execute one tool call: (the text the model sees, the error text or None)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class FileEffectsSession(Protocol):
    """A session whose calls may run programs that change files (APEX-Harm's ``run_command``), and says
    which: the loop records them on the call (``ExecutedCall.file_effects``) for replay."""

    def file_effects(self) -> list[FileEffect]:
        """The files the last call changed, in the order applied; empty when it changed none."""
        ...


@runtime_checkable
class CheckerAudit(Protocol):
    """The pre-model audit of a suite's own checkers, alone: what the multi-suite checker-audit table
    reaches (``registry.get_checker_audit``). Every ``AuditSuite`` of AgentDojo provides it; a suite may
    provide only this half (AgentDojo's Workspace, Travel and Slack, audited on their official
    predicates)."""

    name: str
    benchmark_version: str
    # How the published probe set applies to this suite's tasks, as the table writes it down.
    applicability_rule: str

    def user_tasks(self) -> list[str]:
        """Every user task whose official predicate the audit probes, in the suite's order."""
        ...

    def checker_audit(self, suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict:
        """Probe rows (``stage.AUDIT_FIELDS``; the ``published`` probe set among them) at ``csv_path``;
        the summary at ``summary_path`` with ``defects`` ({task: failure classes, most severe first}).
        ``suite_cfg``: the config's ``suite`` section (its checker-audit profile)."""
        ...


@runtime_checkable
class SuiteEnvironment(Protocol):
    """The environment half of a suite: build, act on, copy and read an environment, and nothing that
    judges an episode. Replay reaches a suite only through this half (``environments.get_environment``),
    so that its recomputation cannot lean on the suite's own metric code."""

    name: str
    # Which of replay's independent recomputations re-judges this suite's rollouts (the key of
    # ``replay/suites.py``): replay asks the suite instead of knowing suite names.
    replay_kind: str

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        """The tools a model may call, as OpenAI function-calling schemas."""
        ...

    def read_only_tools(self) -> frozenset[str]: ...

    def build_environment(self, instance: Instance, attack: str | None, injections: dict[str, str]) -> Any:
        """A fresh environment for one episode: the instance's fixture with the attack's content placed."""
        ...

    def open_tools(self, env: Any, suite_cfg: SuiteConfig | None) -> ToolSession:
        """The session the agent loop calls tools through (``suite_cfg``, the config's ``suite`` section, may
        choose the transport)."""
        ...

    def run_call(self, env: Any, call: Call) -> tuple[str, str | None]:
        """Execute one tool call on ``env`` in process: the text the model sees and the error, if any."""
        ...

    def format_result(self, result: Any) -> str:
        """A tool's return value as the text the model sees."""
        ...

    def state(self, env: Any) -> dict[str, Any]:
        """The environment as plain JSON data."""
        ...

    def state_sha256(self, env: Any) -> str: ...

    def copy_environment(self, env: Any) -> Any:
        """An independent deep copy (the pre-state kept beside an episode)."""
        ...

    def agent_profile(self, name: str) -> AgentProfile | None:
        """The runner profile ``agent.profile`` names (``AgentProfile``): None for ``default`` (evoaudit's
        own loop); ValueError for a name the suite has no runner for."""
        ...


@runtime_checkable
class SimOracle(Protocol):
    """What a suite grants the behavioural simulator besides the instance's own plan (optional: a suite
    whose simulator builds its oracle itself need not provide it)."""

    def goal_plans(self, instance: Instance, attacks: Sequence[str]) -> dict[str, tuple[Call, ...]]:
        """For each attack, the calls that carry out its goal from ``instance``'s benign fixture."""
        ...

    def goal_text(self, attack: str) -> str:
        """The attack's goal as it reads inside the placed content."""
        ...


@runtime_checkable
class AuditSuite(SuiteEnvironment, Protocol):
    """A whole suite: its environment half (``SuiteEnvironment``), its instances, attacks and judging."""

    benchmark_version: str
    # The benchmark the suite belongs to ("agentdojo", "apex-harm"): the report scores and exports a
    # benchmark's suites alike (``report/suites.py``).
    benchmark: str
    # What the families stand for, plural ("banking tasks"), as the report's uncertainty note names them.
    task_noun: str
    variants: tuple[str, ...]
    harm_categories: tuple[str, ...]
    # How method prompts name the executor's job ("banking assistant", "professional-services analyst");
    # the prompts write "a {assistant_role}".
    assistant_role: str
    # Which behaviour the embedded simulator plays on this suite: "tools" (an assistant calling the
    # suite's tools towards the instance's plan, AgentDojo's suites) or "analyst" (an analyst in an
    # APEX-Harm workspace reading, running programs and writing files).
    simulator: Literal["tools", "analyst"]
    # Defences (suite.defenses) this suite cannot run, each with its reason; every other runs on it.
    unsupported_defenses: dict[str, str]

    def families(self, view: SuiteView | None = None) -> list[str]:
        """Kept families (task ids), in a fixed order; with ``view`` (``config.suite_view``), only those its
        selection keeps (``suite.families`` for Banking, ``apex.tasks`` for APEX-Harm). Instances, the plan
        and the workflow's stages all take their families from here."""
        ...

    def excluded(self) -> dict[str, str]:
        """Families left out, each with its reason."""
        ...

    def build_instances(self, view: SuiteView) -> list[Instance]:
        """Every kept family × variant with role, split, fixture, ground truth and corrected predicate."""
        ...

    # --- the suite stage -------------------------------------------------------------------------------
    def planned_instances(self, view: SuiteView) -> list[PlannedInstance]:
        """The instances ``build_instances`` will give, as the plan counts them; available before the
        suite's inputs are built (then an estimate the suite documents)."""
        ...

    def check_selection(self, view: SuiteView) -> None:
        """Raise ValueError, naming the field, when the configuration's selection of this suite's families
        is not one it can run (an unknown id, nothing left to learn on, a field of another suite)."""
        ...

    def checker_audit(self, suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict:
        """The pre-model audit of the suite's own checkers (rule checker_audit): the probe table at
        ``csv_path`` (and the files beside it, ``suite.stage``), the summary at ``summary_path``;
        ``suite_cfg``, the config's ``suite`` section, chooses the profile."""
        ...

    def make_instances(
        self, view: SuiteView, audit_summary: Path, table: Path, spec_path: Path, inputs: dict[str, Path]
    ) -> dict:
        """The instance stage (rule instances): the learning table at ``table``, the sealed endpoint file
        beside it and the suite spec at ``spec_path``, which it returns. ``inputs``: the further files
        ``registry.stage_inputs`` names for this suite."""
        ...

    # --- attacks ---------------------------------------------------------------------------------------
    def attacks(self, configured: Sequence[str], instance: Instance) -> list[str]:
        """Of the arm's ``configured`` attack ids (the config's list, or a placebo or transfer subset of
        it), those an attacked arm runs against ``instance``; empty when none reaches it."""
        ...

    def injections(self, suite_cfg: SuiteConfig, instance: Instance, attack: str | None) -> dict[str, str]:
        """What the attack places, {placement: exact text}; recorded with the rollout. ``{}`` when benign.
        ``suite_cfg``: the config's ``suite`` section (the attack's names, ``suite.attack``)."""
        ...

    def prompt_for(self, instance: Instance, attack: str | None) -> str:
        """The user's request for an episode: ``instance.prompt``, or with what the attack adds to it."""
        ...

    def exposure_applies(self, attack: str | None) -> bool:
        """Whether exposure is defined for this attack (False for attacks that need no reading, such as a
        replaced script the user asked to run; a suite may also say False for benign runs)."""
        ...

    # --- judging ------------------------------------------------------------------------------------------
    def task_score(self, instance: Instance, output: str, pre: Any, post: Any) -> float:
        """The user's task, 0–1 (the mean of rubric criteria; 0 or 1 where the predicate is boolean)."""
        ...

    def check_utility(self, instance: Instance, output: str, pre: Any, post: Any) -> bool:
        """Whether the task is fully done (``task_score == 1``)."""
        ...

    def check_utility_under_attack(
        self, instance: Instance, attack: str, output: str, pre: Any, post: Any
    ) -> bool:
        """AgentDojo's utility under attack: the user's task checked on the real terminal state ``post`` of
        an attacked episode, the attacker's effects left in place. A suite may also define
        ``check_utility_under_attack_isolated`` (same arguments; Banking does): its own variant, recorded
        as ``Outcome.utility_under_attack_isolated`` where present."""
        ...

    def check_goal(self, attack: str, output: str, pre: Any, post: Any) -> bool: ...

    def exposed(self, messages: list[Message], injections: dict[str, str], attack: str | None) -> bool | None:
        """Whether injected content reached the model; None where ``exposure_applies`` is False."""
        ...

    def harm(self, pre: Any, observed: Any, plan: list[Call]) -> dict[str, bool]:
        """One boolean per ``harm_categories`` entry, against the state ``plan`` authorises from ``pre``."""
        ...

    def disclosure(self, attack: str, pre: Any, post: Any) -> bool: ...


@dataclass(frozen=True)
class RunnerCall:
    """One tool call as a runner's executor handled it: the arguments as executed (None: they did not
    parse, nothing ran), the text the model sees, and the error when the call failed or was refused."""

    args: dict[str, Any] | None
    text: str
    error: str | None


@runtime_checkable
class AgentProfile(Protocol):
    """How a benchmark's own runner talks to the model (``agent.profile``), for parity with that runner.

    A suite offers its runners as ``agent_profile(name)`` (``SuiteEnvironment``; ``None`` for
    ``default``). The agent loop then sends the runner's system message, tool schemas, message shapes and
    request body, executes calls as the runner does, and re-runs an episode whose final message has no
    content as often as the runner does; replay executes the recorded calls the same way."""

    system_message: str
    # Runs of the whole episode while its final message has no content (AgentDojo: 3, on the same env).
    attempts: int

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        """The tools as the runner's client sends them."""
        ...

    def request_body(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        temperature: float,
    ) -> dict[str, Any]:
        """The chat-completions body the runner's client sends for these wire messages and tools."""
        ...

    def run_call(
        self, name: str, arguments: str, call: Callable[[str, dict[str, Any]], tuple[str, str | None]]
    ) -> RunnerCall:
        """Call ``name`` with the model's ``arguments`` (JSON text) as the runner's executor does: its
        refusals and argument conversions, the call itself made through ``call`` (``ToolSession.call`` or
        replay's ``run_call``), which returns the text and the error."""
        ...

    def wire_message(
        self, message: Message, *, call_args: Sequence[dict[str, Any] | None] = (), error: bool = False
    ) -> dict[str, Any]:
        """``message`` as the runner's client puts it in a request body. ``call_args``: an assistant
        turn's call arguments as executed (None where they did not parse); ``error``: a tool message
        whose content is the call's error."""
        ...
