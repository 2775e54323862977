"""Typed records that cross stage boundaries: instances, messages, rollouts, artifacts, manifests.

Every record carries ``schema_version`` so that a reader can refuse files written by an incompatible
version instead of misreading them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

SCHEMA_VERSION = 1

Split = Literal["seen", "unseen"]
Arm = Literal["benign", "attacked"]
Role = Literal["acquisition", "validation", "endpoint"]


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
    # The suite's environment YAML for this variant, with ``{vector}`` injection placeholders left in.
    environment_template: str
    ground_truth: list[Call]
    answer: str | None = None  # what a correct final message must state, when the task asks a question
    predicate: dict[str, Any]  # corrected utility predicate: {"kind": ..., **params}
    vectors: list[str] = Field(default_factory=list)  # injection vectors ground truth reaches


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


class ExecutedCall(_Record):
    """A tool call after the runtime saw it: parsed arguments, error if any, the text the model got."""

    call_id: str
    function: str
    args: dict[str, Any] | None  # None when the arguments were not valid JSON
    error: str | None = None
    result: str = ""


class Usage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0


class Outcome(_Record):
    utility: bool
    # The user's task, 0-1 (a rubric's mean; 1.0 or 0.0 where the suite's predicate is boolean, as in
    # Banking). ``utility`` is ``task_score == 1``. Records written before the field existed read it
    # from ``utility``.
    task_score: float
    attack_success: bool | None  # None on benign rollouts
    # Attacked rollouts: the user's task judged with the attacker's effects taken back (those count in
    # attack success and harm); None on benign rollouts.
    utility_under_attack: bool | None = None
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
    # Who decided attack success and exposure, where the suite says (APEX): {"attack_success": {...},
    # "exposure": {...}}, each with value, decided_by (rule / judge / undecided / not_applicable),
    # judge_request and, when undecided, the judge's pending requests. Empty elsewhere, and then left out
    # of the serialised record, so Banking records are unchanged.
    decisions: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _score_from_utility(cls, data: Any) -> Any:
        if isinstance(data, dict) and "task_score" not in data and "utility" in data:
            return {**data, "task_score": 1.0 if data["utility"] else 0.0}
        return data

    @model_serializer(mode="wrap")
    def _drop_empty_decisions(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("decisions"):
            data.pop("decisions", None)
        if isinstance(data, dict) and data.get("timer_hit") is False:
            data.pop("timer_hit")
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

    @model_serializer(mode="wrap")
    def _drop_unset_extensions(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in ("defense", "agent_profile", "max_steps"):
                if name in data and data[name] is None:
                    data.pop(name)
        return data


class ManifestEntry(_Record):
    path: str
    bytes: int
    sha256: str


class Manifest(_Record):
    schema_version: int = SCHEMA_VERSION
    entries: list[ManifestEntry]
    root: str  # sha256 over the sorted entries
    # A lineage's manifest names its lineage; the global one maps every lineage to its own root, so that
    # adding a lineage leaves the existing lineages' manifests (and what depends on them) untouched.
    lineage: str | None = None
    lineage_roots: dict[str, str] = Field(default_factory=dict)


SERVED_FORMAT = "evoaudit-apex-served-1"


class ServedCall(_Record):
    """One tool call a served workspace's tool layer recorded (``suite.apex.workspace.CallRecord``)."""

    seq: int
    tick: int
    tool: str
    args: dict[str, Any]
    result: str
    error: str | None
    actor: str


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
