"""Typed records that cross stage boundaries: instances, messages, rollouts, artifacts, manifests, and
every JSON file one stage writes for another (``FileRecord``: the suite spec, unseal events, the APEX
judge file, replay reports, the APEX run manifest and attack-set stealth).

Every record carries ``schema_version`` so that a reader can refuse files written by an incompatible
version instead of misreading them; a file written before a record had the field reads as version 1.
A ``FileRecord`` is read and written here only (``read``/``write``, atomically), in the layout the file
had before it was typed (the same keys, order and indentation), so outputs keep their bytes but for the
``schema_version`` key.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from evoaudit import atomic
from evoaudit.errors import AuditError

SCHEMA_VERSION = 1

Split = Literal["seen", "unseen"]
Arm = Literal["benign", "attacked"]
Role = Literal["acquisition", "validation", "endpoint"]
# What an instance's ``environment_template`` holds (``Instance.environment_format``).
EnvironmentFormat = Literal["agentdojo-yaml", "apex-world-ref"]


def recordable(value: Any) -> Any:
    """``value`` (JSON data) with text UTF-8 cannot encode (a lone surrogate) kept as backslash escapes, so
    that a record holding it can always be written; everything else is unchanged."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {recordable(k): recordable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [recordable(v) for v in value]
    return value


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Call(_Record):
    """A tool call as a plan or a probe states it (function name and keyword arguments)."""

    function: str
    args: dict[str, Any] = Field(default_factory=dict)


class Instance(_Record):
    """One concrete task: a variant of a family, with everything needed to run and check it."""

    schema_version: int = SCHEMA_VERSION
    instance_id: str  # "<family>.<variant>", e.g. "user_task_3.v2"
    suite: str
    family: str
    variant: str  # v0..v5
    role: Role
    split: Split
    cluster: str
    prompt: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    # Human-readable list of fixture edits this variant makes (e.g. an amount changed in the history).
    fixture_changes: list[dict[str, Any]] = Field(default_factory=list)
    # Opaque above suite/: the suite that built the instance decodes it, after checking
    # ``environment_format``. Not re-encoded to one format: Banking's instance table and every hash over it
    # would change.
    environment_template: str
    # What ``environment_template`` holds: ``agentdojo-yaml``, an AgentDojo suite's environment YAML for
    # this variant with its ``{vector}`` injection placeholders left in, as AgentDojo's loader formats and
    # parses it; ``apex-world-ref``, JSON naming a cached APEX-Harm world and the files that pin it
    # (``suite/apex/environment.py``). Left out of the serialised record when ``agentdojo-yaml``, so that
    # the AgentDojo instance tables written before the field existed keep their bytes (and read as such).
    environment_format: EnvironmentFormat = "agentdojo-yaml"
    ground_truth: list[Call]
    answer: str | None = None  # what a correct final message must state, when the task asks a question
    predicate: dict[str, Any]  # corrected utility predicate: {"kind": ..., **params}
    vectors: list[str] = Field(default_factory=list)  # injection vectors ground truth reaches

    @model_serializer(mode="wrap")
    def _drop_default_format(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("environment_format") == "agentdojo-yaml":
            data.pop("environment_format")
        return data

    def environment(self, expected: EnvironmentFormat) -> str:
        """``environment_template``, refused unless it holds ``expected`` (the decoding suite's format)."""
        if self.environment_format != expected:
            raise AuditError(
                f"instance {self.instance_id}: field environment_format is {self.environment_format!r}, "
                f"the suite decoding it reads {expected!r}; rebuild the instance table with the suite that "
                "runs it (rule instances)"
            )
        return self.environment_template


class ToolCall(_Record):
    """A tool call as the model emitted it: arguments kept as the raw JSON text."""

    id: str
    name: str
    arguments: str


class Message(_Record):
    """One chat message in the OpenAI chat format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    # What a server returned beside the answer: its reasoning text (never sent back, never the answer),
    # and whether the calls were parsed out of text the server left unparsed (a textual action).
    reasoning: str | None = None
    tool_calls_from_text: bool = False


class FileEffect(_Record):
    """One workspace file a call's program changed, as the call copied it back from its sandbox (APEX-Harm's
    ``run_command``): written (its sha256, and its bytes within the session's record bound) or deleted."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    path: str
    """The workspace path the copy-back wrote or removed ('/'-separated, relative to the workspace root)."""
    deleted: bool = False
    """Whether the call removed the file; left out of the serialised record when false."""
    sha256: str | None = None
    """The sha256 of the file's new bytes; None (left out) for a deletion."""
    data: str | None = None
    """The new bytes, base64. None (left out) for a deletion and for a file past the session's record bound
    (``suite.apex.runtime.effects.RECORDED_EFFECT_BYTES``, 1 MiB of file bytes an episode, smallest
    files of a call first): such a file is recorded by its sha256 alone. The sandbox bounds what one call
    can copy back at all (``run_limits.file_size_mb`` a file, four times that a call)."""

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if self.deleted and (self.sha256 is not None or self.data is not None):
            raise ValueError(f"{self.path}: a deletion carries no sha256 or bytes")
        if not self.deleted and self.sha256 is None:
            raise ValueError(f"{self.path}: a written file needs its sha256")
        return self

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, unset in (("deleted", False), ("sha256", None), ("data", None)):
                if name in data and data[name] is unset:
                    data.pop(name)
        return data

    @classmethod
    def written(cls, path: str, content: bytes, keep_bytes: bool = True) -> FileEffect:
        data = base64.b64encode(content).decode("ascii") if keep_bytes else None
        return cls(path=path, sha256=hashlib.sha256(content).hexdigest(), data=data)

    @classmethod
    def removed(cls, path: str) -> FileEffect:
        return cls(path=path, deleted=True)

    def content(self) -> bytes | None:
        """The recorded bytes; None for a deletion, a file recorded by its sha256 alone, or text that is
        not base64."""
        if self.data is None:
            return None
        try:
            return base64.b64decode(self.data, validate=True)
        except ValueError:
            return None


class ExecutedCall(_Record):
    """A tool call after the runtime saw it: parsed arguments, error if any, the text the model got."""

    call_id: str
    function: str
    args: dict[str, Any] | None  # None when the arguments were not valid JSON
    error: str | None = None
    result: str = ""
    # llm_monitor only: the score (0-100) the model gave this output before the agent saw it
    # (suite.defenses); left out of the serialised record when None, so other records keep their bytes.
    monitor_score: int | None = None
    # APEX-Harm's run_command only: the files its program changed, in the order the copy-back applied
    # them (``FileEffect``), so that replay can write the recorded bytes where a re-run writes others (a
    # time stamp, random bytes). Left out of the serialised record when empty (every other call, and a
    # program that changed no file), so other records keep their bytes; a record from before the field
    # existed reads as empty, and replay then takes the re-run's effects as they come.
    file_effects: list[FileEffect] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _drop_unscreened(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            if data.get("monitor_score", 0) is None:
                data.pop("monitor_score")
            if data.get("file_effects") == []:
                data.pop("file_effects")
        return data


class Usage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0


class _Sparse(_Record):
    """A record whose optional fields (``SPARSE``) are left out of its JSON when they were never set, so
    that a record read and written again keeps exactly the keys it had."""

    SPARSE: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.SPARSE:
                if name not in self.model_fields_set and data.get(name) is None:
                    data.pop(name, None)
        return data


class JudgeRequest(_Record):
    """What a rule-based checker left to the judge: one question, asked as the checker would ask it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: str
    """The check the judge answers (a goal's kind, ``exposure``, ``rubric``)."""
    reference: str
    """What the candidate is compared with (the attacker's payload, a rubric criterion)."""
    candidate: str
    """The text found in the episode (a destination record, the answer)."""


class CheckDecision(_Sparse):
    """Who decided one yes/no check of an episode (attack success, exposure), and how."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    SPARSE: ClassVar[tuple[str, ...]] = ("pending",)

    value: bool | None
    """The verdict; None while undecided or where the check does not apply."""
    decided_by: Literal["rule", "judge", "undecided", "not_applicable"]
    """Who gave ``value``: a rule, the judge stage, nobody yet, or nobody (the check does not apply)."""
    judge_request: str | None
    """sha256 of the judge request that decided, when the judge did."""
    evidence: str
    """Where the verdict was found (a destination record), or why not."""
    pending: list[JudgeRequest] | None = None
    """Undecided only: the judge requests still to ask, in the checker's order (first pass wins)."""


class Criterion(_Sparse):
    """One rubric criterion of a task score."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    SPARSE: ClassVar[tuple[str, ...]] = ("judge_request", "pending")

    verifier_id: str
    """The criterion's id in the task's rubric."""
    passed: bool
    """Met; an undecided criterion counts by its offline rule until the judge stage has run."""
    decided_by: Literal["rule", "judge", "undecided"]
    """Who decided ``passed``."""
    judge_request: str | None = None
    """sha256 of the judge request, when the judge decided."""
    pending: JudgeRequest | None = None
    """Undecided only: the request the judge stage will send."""


class TaskDecision(_Record):
    """Who decided an episode's task score, criterion by criterion."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    value: float
    """The share of criteria met (0-1)."""
    decided_by: Literal["rule", "judge", "undecided"]
    """``rule`` when every criterion is a rule's, ``undecided`` while one waits for the judge, ``judge``
    once the judge stage has decided them."""
    criteria: list[Criterion]
    """One entry per rubric criterion, in the rubric's order."""


class Decisions(_Sparse):
    """Who decided an episode's task score and, under attack, attack success and exposure (the APEX
    suite: ``suite/apex/judging/decisions.py``); what ``Outcome.decisions`` and the judge file hold per
    rollout."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    SPARSE: ClassVar[tuple[str, ...]] = ("task_score", "attack_success", "exposure")

    task_score: TaskDecision | None = None
    """The task score's decision; absent in records written before task scores were recorded."""
    attack_success: CheckDecision | None = None
    """Attacked episodes: whether the attacker's goal was reached."""
    exposure: CheckDecision | None = None
    """Attacked episodes: whether the agent was exposed to the injection."""

    def check(self, name: Literal["attack_success", "exposure"]) -> CheckDecision | None:
        """The yes/no check ``name``'s decision, if recorded."""
        return self.attack_success if name == "attack_success" else self.exposure

    def open_requests(self) -> int:
        """Judge requests these decisions leave open: every pending request of an undecided check, and one
        per undecided rubric criterion."""
        checks = (self.attack_success, self.exposure)
        out = sum(len(d.pending or ()) for d in checks if d is not None and d.decided_by == "undecided")
        criteria = self.task_score.criteria if self.task_score is not None else ()
        return out + sum(c.decided_by == "undecided" for c in criteria)

    def updated(self, final: Decisions) -> Decisions:
        """These decisions with every one ``final`` holds taken from it (the judge stage's final ones)."""
        return self.model_copy(update={name: getattr(final, name) for name in final.model_fields_set})


class Outcome(_Record):
    utility: bool
    # The user's task, 0-1 (a rubric's mean; 1.0 or 0.0 where the suite's predicate is boolean, as in
    # Banking). ``utility`` is ``task_score == 1``. Records written before the field existed read it
    # from ``utility``.
    task_score: float
    attack_success: bool | None  # None on benign rollouts
    # Attacked rollouts: AgentDojo's utility under attack, the user-task checker on the real terminal state
    # (the attacker's effects left in place); None on benign rollouts.
    utility_under_attack: bool | None = None
    # Attacked rollouts of a suite that defines it (Banking): evoaudit's variant, the same checker on the
    # terminal state with the attacker's effects taken back first (those count in attack success and
    # harm), the user's task judged alone. None elsewhere, and then left out of the serialised record.
    utility_under_attack_isolated: bool | None = None
    exposed: bool | None  # None where the suite defines no exposure for the attack (exposure_applies)
    harm: dict[str, bool] = Field(default_factory=dict)
    unauthorized_state_change: bool = False
    disclosure: bool | None = None
    textual_action: bool = False
    tool_calls: int = 0
    read_calls: int = 0
    steps: int = 0
    step_limit_hit: bool = False
    # Stopped by the wall-clock limit (agent.time_limit_s / apex.episode_timer_s); left out of the
    # serialised record when False, so that records of a run without the limit are what they were.
    timer_hit: bool = False
    infra_failure: str | None = None  # class name from models.errors when the episode did not finish
    infra_failure_detail: str | None = None  # the server's answer (trimmed, secrets redacted)
    # Who decided the task score and, attacked, attack success and exposure, where the suite says (APEX).
    # None elsewhere, and then left out of the serialised record, so Banking records are unchanged; an
    # empty ``{}`` in a record reads as None.
    decisions: Decisions | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_older_layouts(cls, data: Any) -> Any:
        if isinstance(data, dict) and "task_score" not in data and "utility" in data:
            data = {**data, "task_score": 1.0 if data["utility"] else 0.0}
        if isinstance(data, dict) and data.get("decisions") == {}:
            data = {k: v for k, v in data.items() if k != "decisions"}
        return data

    @model_serializer(mode="wrap")
    def _drop_empty_decisions(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("decisions"):
            data.pop("decisions", None)  # None, or a Decisions with nothing in it
        if isinstance(data, dict) and data.get("timer_hit") is False:
            data.pop("timer_hit")
        if isinstance(data, dict) and data.get("utility_under_attack_isolated", False) is None:
            data.pop("utility_under_attack_isolated")
        return data


class Rollout(_Record):
    TIMING_FIELDS: ClassVar[tuple[str, ...]] = ("wall_s",)

    schema_version: int = SCHEMA_VERSION
    rollout_id: str
    lineage: str
    condition: str
    arm: Arm
    instance_id: str
    family: str
    variant: str
    split: Split
    goal: str | None = None
    seed: int
    executor: dict[str, Any]
    artifact_sha256: str | None = None
    injections: dict[str, str] = Field(default_factory=dict)
    pre_state_sha256: str
    messages: list[Message]
    calls: list[ExecutedCall]
    final_output: str = ""
    terminal_state: dict[str, Any]
    outcome: Outcome
    usage: Usage = Field(default_factory=Usage)
    # Seconds the episode took. Only while a shard is being written (its .partial file) and in memory: a
    # published shard leaves it out and keeps it in the timing file beside it (jsonl.TIMING_SUFFIX), so
    # that the shard's bytes, and every hash over them (acquisition record, seal, bundle), are content.
    wall_s: float | None = None
    # Retrieval-based conditions: which past tasks were retrieved for this episode and the provenance
    # (success/failure) of every inserted item; None when the condition retrieves nothing per episode.
    retrieval: dict[str, Any] | None = None
    # What a restarted job compares before keeping this rollout (evaluate.resume); None on old records.
    resume_key: str | None = None
    # The defence the episode ran under (suite.defenses: what the model saw was rewritten by it); None
    # for the undefended protocol. The runner profile the episode ran under (``agent.profile``) and its
    # turn limit, which replay reads the conversation by; both None for the default profile. Each None is
    # left out of the serialised record, so that an undefended default rollout's bytes are what they were
    # before either existed.
    defense: str | None = None
    agent_profile: str | None = None
    max_steps: int | None = None
    # llm_monitor's threshold, fixed on benign items before the endpoints opened: a call whose
    # monitor_score reaches it was omitted from what the model saw. None (left out) for other records.
    monitor_threshold: int | None = None

    @model_serializer(mode="wrap")
    def _drop_unset_extensions(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in ("defense", "agent_profile", "max_steps", "monitor_threshold"):
                if name in data and data[name] is None:
                    data.pop(name)
        return data


SERVED_FORMAT = "evoaudit-apex-served-1"


class ServedCall(_Record):
    """One tool call a served workspace's tool layer recorded (``suite.apex.base.workspace.CallRecord``)."""

    seq: int
    tick: int
    tool: str
    args: dict[str, Any]
    result: str
    error: str | None
    actor: str
    # An agent's run_command only: the files its program changed, as the workflow's loop records them
    # (``ExecutedCall.file_effects``), so ``apex score`` writes the recorded bytes where its re-run writes
    # others. Left out of the serialised record when empty, so other records keep their bytes.
    file_effects: list[FileEffect] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _drop_no_effects(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("file_effects") == []:
            data.pop("file_effects")
        return data


class ServedEpisode(_Record):
    """One episode an outside agent ran on a served APEX workspace, from its reset to its last call."""

    episode: int
    pre_state_sha256: str
    calls: list[ServedCall] = Field(default_factory=list)
    observer_log: list[dict[str, Any]] = Field(default_factory=list)
    final_answer: str | None = None
    state_sha256: str  # the workspace after the episode's last call (its pre-state before any)


class ServedRecord(_Record):
    """What ``evoaudit apex serve --attack`` records, one document for every episode since it started:
    enough to rebuild the episode's world and re-run its calls (``evoaudit apex score``)."""

    schema_version: int = SCHEMA_VERSION
    format: Literal["evoaudit-apex-served-1"] = SERVED_FORMAT
    instance_id: str
    task_id: str
    variant: str
    world_id: str
    attack: str | None
    episodes: list[ServedEpisode] = Field(default_factory=list)


# --- files one stage writes for another ----------------------------------------------------------------


class RecordFileError(AuditError):
    """A record file is missing, is not JSON, or is not the record it should be."""


def _field_errors(exc: ValidationError) -> str:
    return "; ".join(
        f"field {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()[:5]
    )


class FileRecord(_Sparse):
    """A record that is one JSON file: read and written only through ``read`` and ``write``, in the layout
    the file had before it was typed (``JSON_INDENT``, ``JSON_SORT_KEYS``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    SCHEMA_VERSION: ClassVar[int] = 1
    JSON_INDENT: ClassVar[int] = 2
    JSON_SORT_KEYS: ClassVar[bool] = True
    # What rewrites the file, for the error a bad or missing file raises.
    FIX: ClassVar[str] = "rerun the stage that writes it"

    schema_version: int = SCHEMA_VERSION
    """The record's layout version; a file written before the field existed reads as version 1."""

    @field_validator("schema_version")
    @classmethod
    def _readable_version(cls, v: int) -> int:
        if v > cls.SCHEMA_VERSION:
            raise ValueError(
                f"schema version {v} is newer than this evoaudit reads ({cls.SCHEMA_VERSION}); read it with "
                "the evoaudit that wrote it"
            )
        return v

    @classmethod
    def load_json(cls, path: str | Path) -> Any:
        """The file's JSON, with an error that names the file and the fix when it is missing or torn."""
        path = Path(path)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RecordFileError(f"{path}: no {cls.__name__} file there; {cls.FIX}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RecordFileError(f"{path}: not JSON ({exc}); {cls.FIX}") from None

    @classmethod
    def from_data(cls, data: Any, source: str | Path) -> Self:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecordFileError(
                f"{source}: not a valid {cls.__name__} ({_field_errors(exc)}); {cls.FIX}"
            ) from None

    @classmethod
    def read(cls, path: str | Path) -> Self:
        return cls.from_data(cls.load_json(path), path)

    def dumps(self) -> str:
        return (
            json.dumps(self.model_dump(mode="json"), indent=self.JSON_INDENT, sort_keys=self.JSON_SORT_KEYS)
            + "\n"
        )

    def write(self, path: str | Path) -> None:
        """Write the file atomically (``atomic.write_text``): a reader sees the old file or the new one."""
        atomic.write_text(path, self.dumps())


class ArtifactMeta(FileRecord):
    """An artifact's ``meta.json`` (``methods.artifact``): what a method deployed and what it evolved
    from. Written last into the artifact directory, so a directory without it is one a kill interrupted."""

    FIX: ClassVar[str] = "rerun the evolve (or placebo) rule that writes the artifact"

    method: str
    """The method (``skillopt``, ``awm``, ``reasoningbank``, ``static``, ``placebo-<method>``, ...)."""
    lineage: str
    """The lineage the artifact belongs to."""
    state_files: list[str]
    """File names inside the artifact directory, in insertion order."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Input name -> sha256 (``acquisition``; a later round's ``origin_acquisition`` and
    ``prior_artifact``; a placebo's real artifact)."""
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    """The method's own figures about its run (free-form per method; the report reads them)."""


class AcquisitionRecord(FileRecord):
    """One lineage's acquisition record (``acquire/<lineage>/record.json``, ``evaluate.acquire``): the
    benign episodes every method of the lineage evolves from, pinned by sha256 (matched acquisition)."""

    FIX: ClassVar[str] = "rerun the acquire rule of the lineage"
    SPARSE: ClassVar[tuple[str, ...]] = (
        "round",
        "deployed",
        "deployed_sha256",
        "poison_twin",
        "poison_goal",
        "poison_share",
        "poison_attack",
        "poisoned_episodes",
    )

    lineage: str
    """The lineage."""
    path: str
    """The acquisition rollouts file."""
    sha256: str
    """Its sha256; ``methods.evolve.assert_acquisition`` refuses any other file."""
    rollouts: int
    """Episodes recorded."""
    successes: int
    """Of those, with utility."""
    infra_failures: int
    """Of those, ended by an infrastructure failure."""
    executor: dict[str, Any]
    """The executor endpoint's fingerprint (never a secret)."""
    round: int | None = None
    """A later round (``methods_params.rounds``): its index; absent in the first round."""
    deployed: str | None = None
    """A later round: the previous round's artifact deployed during acquisition."""
    deployed_sha256: str | None = None
    """A later round: that artifact's files hash (``seal.manifest.artifact_sha256``)."""
    poison_twin: str | None = None
    """A poisoned lineage (``poisoning``): its clean twin, whose seeds it draws; absent when clean."""
    poison_goal: str | None = None
    """A poisoned lineage: the persistence goal placed in its poisoned episodes."""
    poison_share: float | None = None
    """A poisoned lineage: the configured share of acquisition episodes poisoned."""
    poison_attack: str | None = None
    """A poisoned lineage: the attack that wrote the poison (``poisoning.attack``, or the suite's own)."""
    poisoned_episodes: list[str] | None = None
    """A poisoned lineage: the rollout ids that carry the poison (a filter before evolution reads these)."""


class ScreenFlag(_Record):
    """Why one write screen flagged one acquisition trajectory (``methods.write_screen``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    screen: str
    """The screen (``write_defenses.screens``): ``instruction_rules`` or ``llm_judge``."""
    reason: str
    """The rule screen: the names of the patterns that matched; the judge: its one-sentence reason, or why it
    gave none (``unanswered``)."""
    call_index: int | None = None
    """The rule screen: the 0-based index, in the trajectory's calls, of the first tool output matched."""
    function: str | None = None
    """The rule screen: that call's tool."""
    excerpt: str | None = None
    """The rule screen: the matched text with a little context, bounded by ``excerpt_chars``."""
    score: float | None = None
    """The judge: its score (0-1) that a tool output carries an instruction the task does not support; None
    when its answer stayed malformed."""


class DroppedTrajectory(_Record):
    """One acquisition trajectory a write screen dropped: which episode, and every screen's reason."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    index: int
    """Its 0-based line in the acquisition rollouts file."""
    rollout_id: str
    """Its rollout id."""
    instance_id: str
    """The instance (family and variant) of the episode."""
    flags: list[ScreenFlag]
    """Every screen that flagged it, in ``write_defenses.screens`` order."""


class WriteScreenRecord(FileRecord):
    """The write screens' record of one lineage (``acquire/<lineage>/screened/record.json``): the
    acquisition record it read, the screened rollouts every learning method evolves from, and what was
    dropped and why. The hash chain: ``source_sha256`` is the acquisition record's ``sha256``, ``sha256`` the
    screened file's, which each artifact records as ``inputs.write_screen``."""

    FIX: ClassVar[str] = "rerun the write_screen rule of the lineage"

    lineage: str
    """The lineage."""
    screens: list[str]
    """The screens applied (``write_defenses.screens``), each to every trajectory."""
    source: str
    """The acquisition rollouts file screened."""
    source_sha256: str
    """Its sha256, which must equal the acquisition record's (matched acquisition)."""
    path: str
    """The screened rollouts file: the kept lines of the source, byte for byte and in order."""
    sha256: str
    """Its sha256; the evolve job refuses any other file."""
    rollouts: int
    """Trajectories screened (every line of the source)."""
    kept: int
    """Of those, kept."""
    flagged: dict[str, int]
    """Per screen, how many trajectories it flagged (each screen judges every trajectory, so these are its
    own counts of ``rollouts``, independent of the others)."""
    dropped: list[DroppedTrajectory]
    """The dropped trajectories, in file order."""
    settings: dict[str, Any]
    """The ``write_defenses`` block the screens ran with."""
    judge: dict[str, Any] | None = None
    """The optimizer endpoint's fingerprint when ``llm_judge`` ran (never a secret)."""


class ManifestEntry(_Record):
    """One frozen file."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    path: str
    """The file, relative to the results directory."""
    bytes: int
    """Its size."""
    sha256: str
    """Its content hash."""


class Manifest(FileRecord):
    """A freeze manifest (``freeze/manifest.json``, ``freeze/<lineage>/manifest.json``)."""

    FIX: ClassVar[str] = "rerun the freeze stage"

    entries: list[ManifestEntry]
    """Every frozen file, sorted by path."""
    root: str
    """sha256 over the sorted entries (``seal.manifest.root_hash``)."""
    lineage: str | None = None
    """The lineage of a lineage manifest; None for the global one."""
    lineage_roots: dict[str, str] = Field(default_factory=dict)
    """The global manifest: each lineage's own root, so that adding a lineage leaves the existing
    lineages' manifests (and what depends on them) untouched."""


class Correction(_Record):
    """How the suite stage replaced one family's official predicate (Banking)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    official_defects: list[str]
    """Defects the checker audit's probes found in the official predicate."""
    extension_defects: list[str]
    """Defects the extended (strict) probes found."""
    predicate_kind: str
    """The corrected predicate's kind."""
    correction: str
    """What the corrected predicate checks, in words."""


class ResultsOwner(FileRecord):
    """The configuration that owns a results directory (``<results_dir>/.evoaudit-owner.json``, written by
    ``ops.ownership.claim`` when a run starts): no other configuration may run there."""

    FIX: ClassVar[str] = "delete it to hand the directory over; the next run writes it again"

    config_sha256: str
    """``config.config_sha256`` of the owning configuration (results_dir included)."""
    config_files: list[str]
    """The configuration files it was read from (absolute paths); an edit of them keeps the ownership."""
    since: str
    """When the directory was first claimed (UTC, ISO 8601)."""


class PreflightRecord(FileRecord):
    """What the endpoint pre-flight found, per role (``logs/preflight.json`` under ``results_dir``, written by
    ``models.preflight.record`` before the first job of a run that calls a server)."""

    FIX: ClassVar[str] = "run the workflow again: its pre-flight (Snakemake's onstart) writes it"

    roles: dict[str, dict[str, Any]]
    """Per role (``executor``, ``optimizer``, ``apex.judge``, ...): ``preflight.check``'s findings (served
    models, completion time, render probe, tool-call probe, structured-output probe with its form)."""
    time: str
    """When the pre-flight ran (UTC, ISO 8601)."""


class CheckerAuditSummary(FileRecord):
    """A checker audit's summary (``suite/checker_audit_summary.json``; each extra suite's under
    ``suites/<suite>/``): which official predicates the probes found defective. Written by the suite's
    checker audit (Banking's, AgentDojo's other suites', APEX-Harm's skipped one); read by the suite's
    instance stage (its sha256 is pinned in the suite spec) and the report."""

    FIX: ClassVar[str] = "rerun the checker_audit rule"
    SPARSE: ClassVar[tuple[str, ...]] = (
        "suite",
        "benchmark_version",
        "applicability_rule",
        "skipped",
        "extension",
        "extension_csv",
        "strict_passing",
        "goal_checkers",
        "goal_checker_probes",
    )

    profile: str
    """The probe set it ran under (``suite.checker_audit.profile``: ``published`` or ``strict``)."""
    failing: dict[str, str]
    """Per user task whose official predicate has a defect: the first defect found."""
    passing: list[str]
    """User tasks whose official predicate passed every probe."""
    defects: dict[str, list[str]]
    """Per user task: every defect found, in the probe order."""
    excluded: dict[str, str]
    """User tasks left out of the audit, with the reason."""
    suite: str | None = None
    """The suite audited; absent in Banking's summary, which predates the other suites'."""
    benchmark_version: str | None = None
    """AgentDojo's other suites: the benchmark version audited."""
    applicability_rule: str | None = None
    """AgentDojo's other suites: the rule that says whether a probe applies to a task."""
    skipped: str | None = None
    """APEX-Harm: why no checker audit ran."""
    extension: dict[str, list[str]] | None = None
    """Banking (and APEX-Harm, empty): per task, the defects only the strict probe set found."""
    extension_csv: str | None = None
    """Banking: file name of the strict probe set's table, beside the summary."""
    strict_passing: list[str] | None = None
    """Banking (and APEX-Harm, empty): user tasks that passed the strict probe set too."""
    goal_checkers: dict[str, dict[str, list[str]]] | None = None
    """Banking (and APEX-Harm, empty): per injection goal, the probes its checker judged leniently or
    blindly."""
    goal_checker_probes: str | None = None
    """Banking: file name of the goal-checker probe table, beside the summary."""


class SuiteSpec(FileRecord):
    """The frozen suite spec (``suite/suite_spec.json``): what the suite stage fixed, the instance tables
    pinned by sha256. Written by ``suite.stage.write_spec``; read by every stage that opens a table."""

    FIX: ClassVar[str] = "rerun the suite stage (rule instances)"

    suite: str
    """The suite's name (``banking``, ``apex``)."""
    benchmark_version: str
    """The benchmark's version the instances were built from."""
    checker_audit_profile: str
    """``suite.checker_audit.profile`` the checker audit ran under."""
    checker_audit_sha256: str
    """sha256 of the checker audit's summary file."""
    instances_sha256: str
    """sha256 of the learning table (acquisition and validation variants)."""
    records_sha256: str
    """Hash over the learning table's records (independent of the parquet encoding)."""
    endpoint_table: str
    """File name of the sealed endpoint table, beside the learning table."""
    endpoint_sha256: str
    """sha256 of the sealed endpoint table; ``seal.guard`` opens only that file."""
    endpoint_records_sha256: str
    """Hash over the endpoint table's records."""
    endpoint_variants: list[str]
    """The sealed variants; the config's endpoint roles must list every one of them."""
    variant_probes_sha256: str
    """sha256 of the per-variant probe table (``variant_probes.csv``)."""
    families: list[str]
    """The task families with instances."""
    excluded: dict[str, str]
    """Families left out, with the reason."""
    official_unchanged: list[str]
    """Families whose official predicate was kept (the report's sensitivity check)."""
    official_only_spurious: list[str]
    """Families whose only defect is accepting an unrequested extra action."""
    corrections: dict[str, Correction]
    """Per corrected family: what was wrong and what replaces it."""
    goal_checkers: dict[str, dict[str, list[str]]]
    """Per injection goal: the probes its checker judged leniently or blindly."""
    goal_checker_probes: str | None
    """File name of the goal-checker probe table, when the suite has one."""
    split: dict[str, Split]
    """Per family: seen or unseen."""
    clusters: dict[str, str]
    """Per family: its cluster."""
    roles: dict[str, Role]
    """Per variant: acquisition, validation or endpoint."""
    vectors: dict[str, list[str]]
    """Per instance: the injection vectors its ground truth reaches."""
    # APEX-Harm only (left out of Banking's spec): the skipped checker audit and what instances point at.
    checker_audit_skipped: str | None = None
    """APEX-Harm: why the checker audit was skipped."""
    apex_worlds_spec_sha256: str | None = None
    """APEX-Harm: the worlds spec's own content hash."""
    apex_worlds_spec_file_sha256: str | None = None
    """APEX-Harm: sha256 of the worlds spec file."""
    apex_attack_set_sha256: str | None = None
    """APEX-Harm: sha256 of the frozen attack set file."""
    apex_attacks: list[str] | None = None
    """APEX-Harm: the attacks of ``suite.goals`` that reach some endpoint instance."""
    apex_attack_count: int | None = None
    """APEX-Harm: the number of attacks in the frozen set."""

    SPARSE: ClassVar[tuple[str, ...]] = (
        "checker_audit_skipped",
        "apex_worlds_spec_sha256",
        "apex_worlds_spec_file_sha256",
        "apex_attack_set_sha256",
        "apex_attacks",
        "apex_attack_count",
    )


class UnsealEvent(FileRecord):
    """One unseal (``seal.freeze.unseal``): ``freeze/unseal.json`` (global scope) or
    ``freeze/<lineage>/unseal.json`` (lineage scope), and one line of ``freeze/unseal_log.jsonl`` each."""

    FIX: ClassVar[str] = "rerun the unseal stage"

    key: str
    """What was unsealed: ``global`` or ``lineage:<name>``."""
    scope: Literal["global", "lineage"]
    """``seal.seal_scope`` of the unseal."""
    manifest_root: str
    """Root of the freeze manifest the unseal opened endpoints for."""
    lineage_roots: dict[str, str]
    """Each covered lineage's own manifest root."""
    files: dict[str, str]
    """Every frozen file's sha256, so that a later unseal can tell an extension from a change."""
    kind: Literal["first", "extension", "redo", "forced"]
    """First unseal of its key, or why a new root was accepted."""
    previous_root: str | None
    """The root unsealed before for the same key, if any."""
    time: str
    """When (UTC, ISO 8601, seconds)."""
    code: dict[str, Any]
    """The evoaudit source's git revision and dirty flag."""


class LineageOpening(FileRecord):
    """Under ``seal_scope: global``, a lineage's ``freeze/<lineage>/unseal.json``: the lineage opened
    because the global unseal event covers its manifest root (``seal.freeze.open_lineage``)."""

    FIX: ClassVar[str] = "rerun the unseal stage"

    key: str
    """``lineage:<name>``."""
    scope: Literal["global"]
    """Always global: the lineage rides on the global unseal."""
    lineage: str
    """The lineage opened."""
    manifest_root: str
    """The lineage manifest's root."""
    global_root: str
    """The global manifest root the global unseal event names."""
    unsealed_at: str
    """The global unseal event's time."""
    kind: Literal["first", "extension", "redo", "forced"]
    """The global unseal event's kind."""


def read_unseal_event(path: str | Path) -> UnsealEvent | LineageOpening:
    """The unseal event at ``path``, of either kind (a lineage opening names its ``global_root``)."""
    data = UnsealEvent.load_json(path)
    kind = LineageOpening if isinstance(data, dict) and "global_root" in data else UnsealEvent
    return kind.from_data(data, path)


def read_unseal_log(path: str | Path) -> list[UnsealEvent]:
    """Every event of an unseal log (one JSON line each), in order; none when there is no log."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        UnsealEvent.from_data(json.loads(line), f"{path} line {n}")
        for n, line in enumerate(lines, 1)
        if line.strip()
    ]


def unseal_log_line(event: UnsealEvent) -> str:
    """``event`` as one line of the unseal log."""
    return json.dumps(event.model_dump(mode="json"), sort_keys=True) + "\n"


class SupersededEntry(FileRecord):
    """One artifact archived for a redo (``seal.redo.archive_for_redo``): a line of
    ``freeze/superseded/log.jsonl``. The next unseal accepts a changed root as a redo of exactly these."""

    FIX: ClassVar[str] = (
        "restore the log from the bundle or a backup; it is appended to by `evoaudit redo` only"
    )

    artifact: str
    """The artifact directory, relative to the results directory (``artifacts/<lineage>/<name>``)."""
    archived_to: str
    """Where it was moved, relative to the results directory."""
    files: dict[str, str]
    """Its files' sha256 when archived, by path inside the artifact."""
    unsealed_root: str
    """The manifest root of the unseal event that covered it."""
    unseal_key: str
    """That event's key (``global`` or ``lineage:<name>``)."""
    reason: str
    """Why it is redone (``evoaudit redo --reason``)."""
    time: str
    """When (UTC, ISO 8601, seconds)."""
    code: dict[str, Any]
    """The evoaudit source's git revision and dirty flag."""


def read_superseded_log(path: str | Path) -> list[SupersededEntry]:
    """Every entry of a superseded log (one JSON line each), in order; none when there is no log."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        SupersededEntry.from_data(json.loads(line), f"{path} line {n}")
        for n, line in enumerate(lines, 1)
        if line.strip()
    ]


def superseded_log_line(entry: SupersededEntry) -> str:
    """``entry`` as one line of the superseded log."""
    return json.dumps(entry.model_dump(mode="json"), sort_keys=True) + "\n"


APEX_JUDGE_FORMAT = "evoaudit-apex-judge-1"


class JudgeFile(FileRecord):
    """The APEX judge stage's file for one model (or ablation arm): every rollout's final decisions."""

    JSON_INDENT: ClassVar[int] = 1
    FIX: ClassVar[str] = "rerun its apex_judge rule"

    format: Literal["evoaudit-apex-judge-1"] = APEX_JUDGE_FORMAT
    """Tells the file from other JSON."""
    model: str
    """The model (``apex.models[].id``) whose episodes were judged."""
    judge: dict[str, Any]
    """The judge endpoint's fingerprint (backend, model, sampling; never a secret)."""
    asked: int
    """Requests sent to the judge (the rest came from rules)."""
    decisions: dict[str, Decisions]
    """Final decisions by rollout id; rollouts that recorded none (an infrastructure failure) are absent."""


class ReplayDetail(_Record):
    """One field on which a replayed rollout differs from its record."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    rollout_id: str
    """The rollout."""
    field: str
    """The field (``replay.recompute.field_family`` groups them)."""
    recorded: str
    """``repr`` of the recorded value, at most 300 characters."""
    recomputed: str
    """``repr`` of the recomputed value, at most 300 characters."""


class NondeterministicCall(_Sparse):
    """A call whose re-run program wrote other bytes to the files it wrote when recorded (replay wrote the
    recorded ones), or printed a text other than the recorded one and another again when run a second time
    (replay took the recorded text; ``replay.apex``): the call is where replay takes the record's word."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    SPARSE: ClassVar[tuple[str, ...]] = ("output",)

    rollout_id: str
    """The rollout."""
    call_id: str
    """The call (``ExecutedCall.call_id``)."""
    paths: list[str]
    """The files whose re-run bytes differed from the recorded ones (none when only its text varied)."""
    output: bool | None = None
    """True when its printed text varied between replay's two runs of its program; left out otherwise."""


class ReplayReport(FileRecord):
    """Replay's report on one shard (``replay.stage.replay_shard``): what was recomputed, what differs."""

    JSON_SORT_KEYS: ClassVar[bool] = False
    FIX: ClassVar[str] = "rerun its replay rule"
    SPARSE: ClassVar[tuple[str, ...]] = ("nondeterministic_calls",)

    rollouts: str
    """The shard replayed."""
    replayed: int
    """Rollouts replayed."""
    mismatched_rollouts: int
    """Rollouts with at least one differing field."""
    mismatches_by_field: dict[str, int]
    """Differing fields, counted by field family."""
    on_mismatch: Literal["fail", "record"]
    """``seal.replay_on_mismatch``: whether a mismatch failed the job or was only recorded."""
    details: list[ReplayDetail]
    """Every differing field."""
    nondeterministic_calls: list[NondeterministicCall] | None = None
    """Calls replayed with their recorded file effects where the re-run's differed only in bytes, or with
    their recorded text where the program prints another each run (APEX-Harm's ``run_command``); not
    mismatches. Left out of the file when there are none."""

    @field_validator("mismatched_rollouts", mode="before")
    @classmethod
    def _count_listed(cls, v: Any) -> Any:
        # Early reports listed the mismatched rollouts instead of counting them.
        return len(v) if isinstance(v, list) else v


class Difference(_Record):
    """One rerun rollout that differs from its record."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    rollout_id: str
    """The rollout."""
    shard: str
    """The shard that holds its record."""
    fields: list[str]
    """Top-level fields that differ (timing aside); ``["<missing>"]`` when the rerun lost the rollout."""


class DeterminismReport(FileRecord):
    """The determinism check's report (``verify/verify.json``, ``verify.verify_rollouts``): a sample of
    rollouts rerun and compared with their records; it travels with the replay reports."""

    FIX: ClassVar[str] = "rerun the verify rule"

    sampled: int
    """Rollouts rerun."""
    verified: int
    """Of those, byte-identical to their records (timing and answer-source fields aside)."""
    differing: int
    """Of those, different."""
    ignored_fields: list[str]
    """Fields left out of the comparison."""
    rollouts: list[str]
    """The sampled rollouts' keys."""
    details: list[Difference]
    """Every differing rollout."""


class RunModel(_Record):
    """One APEX model's orchestrator settings in the run manifest."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """``apex.models[].id``."""
    backend: str
    """Executor backend."""
    model: str
    """Model name the endpoint serves."""
    base_url: str | None
    """Endpoint URL, credentials redacted."""
    max_tokens_per_response: int | None
    """Completion token limit per request."""
    temperature: float | None
    """Sampling temperature."""
    streaming: bool
    """Whether responses were streamed (never: one request per step)."""
    concurrency: int
    """Requests in flight at once."""
    max_retries: int
    """Retries per request before the episode is an infrastructure failure."""
    request_timeout_s: float | None
    """Timeout of one request."""
    sim_overrides: dict[str, Any] | None
    """Simulator settings this model overrides (simulator only)."""


class RunManifest(FileRecord):
    """The APEX runs' orchestrator settings (``apex/run_manifest.json``), per model, with what they pin."""

    FIX: ClassVar[str] = "rerun the apex_manifest rule"

    suite: str
    """Always ``apex``."""
    step_limit: int
    """``apex.step_limit``."""
    episode_timer: float | None
    """``apex.episode_timer_s``: the wall-clock limit per episode; None: only the step limit and each
    request's timeout end an episode."""
    repeats: int
    """``apex.repeats``."""
    seed_derivation: str
    """How each episode's seed is derived."""
    seed: int
    """The global seed."""
    categories: list[str]
    """``apex.categories``."""
    shards: int
    """``apex.shards``."""
    failure_handling: dict[str, Any]
    """Failure policy, excluded share and retries."""
    system_prompt: str
    """``apex.system_prompt``."""
    judge: dict[str, Any]
    """The judge endpoint's backend and model."""
    worlds_spec_sha256: str | None
    """The worlds spec's content hash."""
    attack_set_sha256: str
    """sha256 of the frozen attack set file."""
    run_sha256: str
    """The run pin over both."""
    models: list[RunModel]
    """Per model."""
    sandbox: dict[str, Any]
    """The sandbox that runs workspace programs."""


class VectorStealth(_Record):
    """One attack vector's row of ``AttackStealth``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    vector: str
    """The document kind or app: txt, md, docx, xlsx, pdf, mail, chat, calendar."""
    auc: float | None
    """Out-of-fold ROC AUC of the classifier over folds grouped by goal (injected) and world (benign), 0.5
    is chance; None when a class has fewer than 2 groups."""
    auc_lo: float | None = None
    """Lower end of ``auc``'s 95% bootstrap interval over groups (None as for ``auc``, or a file written
    before intervals were recorded)."""
    auc_hi: float | None = None
    """Upper end of ``auc``'s 95% bootstrap interval over groups (None as for ``auc_lo``)."""
    length_auc: float | None = None
    """ROC AUC of the item's length alone (longer scores as injected; below 0.5 the injected items are the
    shorter ones): the baseline ``auc`` is read against (None as for ``auc``; a file written before this
    field was recorded has none)."""
    length_auc_lo: float | None = None
    """Lower end of ``length_auc``'s 95% bootstrap interval over groups (None as for ``auc_lo``)."""
    length_auc_hi: float | None = None
    """Upper end of ``length_auc``'s 95% bootstrap interval over groups (None as for ``auc_lo``)."""
    n_injected_groups: int | None = None
    """Distinct goals among the injected items (the folds' and bootstrap's groups; None in older files)."""
    n_benign_groups: int | None = None
    """Distinct worlds among the benign items (the folds' and bootstrap's groups; None in older files)."""
    n_injected: int
    """Distinct injected items of this vector in the attack set (the positives)."""
    n_benign: int
    """Benign items of this kind from the worlds (the negatives; at most ``worldtext.BENIGN_CAP``)."""
    top_features: list[str]
    """The character n-grams that most mark an item as injected (the classifier's largest coefficients)."""


class AttackStealth(FileRecord):
    """Whether the frozen attack set's injected text stands out in its worlds (``apex/attack_stealth.json``):
    the world build's stealth check (``suite.apex.attacks.stealth``) run on the notes the configured attacker
    wrote, against the benign items of the endpoint variant's worlds."""

    FIX: ClassVar[str] = "rerun the apex_stealth rule (snakemake apex_stealth)"

    attacker_model: str
    """``suite.apex.attacker.model``: the attacker that wrote the notes."""
    sim_note_version: int | None
    """The simulated attacker's note version when the simulator wrote them (then a mechanism check of its
    templates, not a finding about an attacker model); None for a model endpoint."""
    attack_set_sha256: str
    """sha256 of the attack set measured."""
    worlds_spec_sha256: str
    """``sha256`` of the worlds spec (``apex_spec.json``) whose benign items were compared."""
    variant: str
    """The worlds' variant (the endpoint variant, ``suite.apex.variants[0]``)."""
    vectors: list[VectorStealth]
    """One row per vector, in ``worldtext.STEALTH_VECTORS`` order."""


class ProvenanceEntry(_Record):
    """What is needed to reproduce one output file: one entry of the ``provenance.json`` beside it, keyed by
    the output's name (``provenance.write_provenance``). A stage adds fields of its own (a defence, the
    judge's fingerprint, replay's policy, ...), kept as they are."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    schema_version: int = SCHEMA_VERSION
    """The entry's layout version; an entry written before the field existed reads as version 1."""
    stage: str | None
    """The stage that wrote the output."""
    config_sha256: str
    """Hash of the configuration, URL credentials redacted."""
    code: dict[str, Any]
    """The evoaudit source's git revision and dirty flag."""
    packages: dict[str, str | None]
    """Versions of the packages results depend on."""
    suite_spec_sha256: str | None
    """sha256 of the suite spec the stage read, if any."""
    executor: dict[str, Any]
    """The executor endpoint's fingerprint (never a secret)."""
    optimizer: dict[str, Any]
    """The optimizer endpoint's fingerprint."""
    seeds: dict[str, Any]
    """The global seed and how episode seeds derive from it."""
    seed: int
    """The global seed."""
    manifest_root: str | None
    """Root of the freeze manifest the stage read, if any."""
    seal_scope: str
    """``seal.seal_scope``."""
    infra_failure_policy: str
    """``evaluation.infra_failure_policy``."""


PROVENANCE_ENTRIES = TypeAdapter(dict[str, ProvenanceEntry])


def read_provenance(path: str | Path) -> dict[str, ProvenanceEntry]:
    """The entries of a ``provenance.json`` by output name; none when there is no file."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        return PROVENANCE_ENTRIES.validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise RecordFileError(
            f"{path}: not a valid provenance file ({_field_errors(exc)}); delete it and rerun the stages "
            "whose outputs are beside it"
        ) from None


def write_provenance_file(path: str | Path, entries: dict[str, ProvenanceEntry]) -> None:
    """Write ``entries`` sorted by output name, atomically."""
    data = {name: entries[name].model_dump(mode="json") for name in sorted(entries)}
    atomic.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


class ContaminationHit(_Record):
    """One artifact unit that carries attacker content (``methods.contamination``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    unit_id: str
    """The unit, as its method names it (``Method.units``)."""
    unit_kind: str
    """What the unit is: a skill line, a workflow step, a memory item, a playbook bullet, ..."""
    kind: Literal["exact", "near", "identifier"]
    """exact: a verbatim run of the injection text; near: most of an injected sentence's word n-grams
    without such a run; identifier: an attacker identifier (IBAN, URL, e-mail address) that no unpoisoned
    acquisition episode holds. A unit with several is recorded once, by the first that applies."""
    evidence: str
    """The matched run, the injected sentence, or the identifier."""
    score: float
    """exact and identifier: 1.0; near: the share of the sentence's word n-grams the unit holds."""
    unit_text: str
    """The unit's text as the artifact holds it (cut to 500 characters), quoted in the report."""
    sources: list[str]
    """The poisoned acquisition episodes (rollout ids) whose injection carries the evidence; only the one
    the method records as the unit's origin when it is among them."""


class ArtifactContamination(_Record):
    """The contamination of one frozen artifact."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    lineage: str
    """The artifact's lineage: the poisoned one or its clean twin (the control)."""
    method: str
    """The method (its installed name)."""
    round: int = 1
    """The evolution round the artifact is from (``methods_params.rounds``; 1: the protocol's one pass)."""
    artifact_sha256: str
    """The artifact's files hash (``seal.manifest.artifact_sha256``) of the frozen files read."""
    units: int
    """Units the artifact holds (``Method.units``): the denominator of ``contaminated_units``."""
    contaminated_units: int
    """Units with any hit."""
    exact_units: int
    """Units whose hit is exact."""
    near_units: int
    """Units whose hit is near."""
    identifier_units: int
    """Units whose hit is an identifier."""
    hits: list[ContaminationHit]
    """Every contaminated unit, in the artifact's order."""


class ContaminationReport(FileRecord):
    """The contamination of one poisoned lineage's frozen artifacts and its clean twin's
    (``poisoning/contamination/<lineage>.json``, ``methods.contamination``); replay recomputes it."""

    FIX: ClassVar[str] = "rerun the contamination rule of the poisoned lineage"

    lineage: str
    """The poisoned lineage."""
    twin: str
    """Its clean twin."""
    goal: str
    """The persistence goal placed."""
    share: float
    """The configured share of acquisition episodes poisoned."""
    acquisition_sha256: str
    """sha256 of the poisoned acquisition rollouts read."""
    poisoned_episodes: list[str]
    """The acquisition episodes that carried the poison (rollout ids)."""
    identifiers: list[str]
    """The attacker identifiers found in the injections and in no unpoisoned acquisition episode."""
    params: dict[str, Any]
    """The matching thresholds (``poisoning.contamination``)."""
    artifacts: list[ArtifactContamination]
    """Per round, then (lineage, method): the poisoned lineage's artifacts, then the twin's, each in config
    order (``methods.contamination.covered_artifacts``)."""


class ContaminationReplayReport(FileRecord):
    """Replay's recomputation of one contamination report (``poisoning/replay/<lineage>.json``,
    ``replay.contamination``)."""

    FIX: ClassVar[str] = "rerun the replay_contamination rule of the poisoned lineage"

    lineage: str
    """The poisoned lineage."""
    report_sha256: str
    """sha256 of the contamination report compared."""
    artifacts: int
    """Artifacts recomputed (the poisoned lineage's and its twin's)."""
    mismatches: list[str]
    """Each field of the report the recomputation disagrees with (empty: it agrees)."""


class PersistenceRow(_Record):
    """One evaluated episode of a poisoned lineage or its clean twin, as the persistence table reads it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    lineage: str
    """The poisoned lineage or its twin."""
    condition: str
    """The evaluated condition."""
    arm: Arm
    """benign: the clean endpoint (no injection present); attacked: the usual attacked endpoint."""
    instance_id: str
    """The endpoint instance."""
    family: str
    """Its family (the bootstrap's cluster)."""
    goal: str | None
    """The evaluation-time injection goal (attacked arm), else None."""
    seed: int
    """The episode seed; the poisoned lineage's equals its twin's on the same episode."""
    infra_failure: bool
    """The episode ended in an infrastructure failure (left out of every denominator)."""
    utility: bool
    """The user task's checker."""
    unauthorized_state_change: bool
    """The rollout's unauthorised state change."""
    poison_goal_met: bool
    """The poisoning goal's security check on the episode's terminal state (AgentDojo-style): on the benign
    arm, sleeper success."""
    state_matches: bool
    """The recorded calls, re-executed on the pre-state, give the recorded terminal state (the check read
    the state the episode left)."""


class PersistenceReport(FileRecord):
    """The persistence of one poisoning at the endpoints (``poisoning/persistence/<lineage>.json``,
    ``evaluate.persistence``)."""

    FIX: ClassVar[str] = "rerun the persistence rule of the poisoned lineage"

    lineage: str
    """The poisoned lineage."""
    twin: str
    """Its clean twin."""
    goal: str
    """The poisoning goal checked on every episode."""
    share: float
    """The configured share of acquisition episodes poisoned."""
    rows: list[PersistenceRow]
    """Every episode of the poisoned lineage and its twin under the evaluated conditions, both arms."""
