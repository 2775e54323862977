"""The environment half of the APEX-Harm suite (``interface.SuiteEnvironment``): worlds, tools, attacks.

An instance's ``environment_template`` is a reference to a cached world, not the world itself: JSON with the
cache directory, world id, task key, the path of the frozen attack set, and the sha256 of the world, task
record, task files and plans as the build manifest recorded them. ``build_environment`` refuses a cache
whose files no longer hash to it, then lays the attack's content over the world: ``threat.AttackInstance``
records from the frozen set (``attacks.build_from_config``), resolved by id; a dynamic attack's watcher is
attached to the workspace. Nothing here judges an episode (replay may use this module; see
``suite/environments.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.records import Call, Instance
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks import placement, poison
from evoaudit.suite.apex.base.filetext import ToolError, file_text
from evoaudit.suite.apex.base.threat import AttackInstance, Goal
from evoaudit.suite.apex.base.workspace import Workspace, kind_of
from evoaudit.suite.apex.base.worldfmt import TaskRecord
from evoaudit.suite.apex.runtime import tools, transport, watcher
from evoaudit.suite.apex.runtime.isolation import sandbox_status, settings_fields
from evoaudit.suite.apex.worlds import cache, goals

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig

SUITE_NAME = "apex"
ATTACK_SET = "attacks.json"


@functools.cache
def _load_attack_set(
    path: str, mtime_ns: int, size: int, pin_mtime_ns: int, sha256: str | None
) -> dict[str, AttackInstance]:
    # Keyed on the file's and its pin's stamps as well as the path: a rebuilt or edited set is read (and
    # verified) again.
    return {a.attack_id: a for a in attack_sets.load_attack_set(path, sha256)}


def attack_set(path: str | Path, sha256: str | None = None) -> dict[str, AttackInstance]:
    """The frozen attacks in ``path`` by id, verified against the pin beside the file and ``sha256`` (what
    an instance recorded); empty when the set has not been built."""
    p = Path(path)
    if not p.exists():
        return {}
    st = p.stat()
    pin = attack_sets.pin_path(p)
    pin_mtime = pin.stat().st_mtime_ns if pin.exists() else 0
    return _load_attack_set(str(p), st.st_mtime_ns, st.st_size, pin_mtime, sha256)


def instance_attack_set(ref: dict[str, Any]) -> dict[str, AttackInstance]:
    """The attack set an instance's environment reference names, checked against the sha256 it pinned."""
    return attack_set(ref["attack_set"], ref.get("attack_set_sha256"))


def attack_category(attack_id: str) -> int:
    """The category an attack id names (``c<category><variant>.<task>.<k>``)."""
    if len(attack_id) < 2 or attack_id[0] != "c" or not attack_id[1].isdigit():
        raise ValueError(f"{attack_id!r} is not an APEX attack id (c<category><variant>.<task_id>.<k>)")
    return int(attack_id[1])


class ApexEnvironments:
    """Workspaces built from the world cache, with the frozen attacks' content in place."""

    name = SUITE_NAME
    replay_kind = "apex"

    def __init__(self) -> None:
        # Task records by world id and attacks by id, kept as ``build_environment`` resolves them, so that
        # the judging half can read a task's prompt and gold values (a world belongs to one task).
        self._records: dict[str, TaskRecord] = {}
        self._attacks: dict[str, AttackInstance] = {}
        # The world before any attack content, by world id: what the user's task is authorised against.
        self._benign: dict[str, Workspace] = {}
        # The task's own files by world id: a ``task_files`` goal compares against their text.
        self._task_files: dict[str, dict[str, bytes]] = {}

    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        return tools.tool_schemas()

    def read_only_tools(self) -> frozenset[str]:
        return tools.READ_ONLY

    def resolve_attack(self, instance: Instance, attack: str) -> AttackInstance:
        ref = template(instance)
        if poison.is_poison(attack):
            # A persistence goal of the poisoning extension, placed in this instance's own world (never in
            # the frozen set). Exposure and success read only its instruction, targets and goal, which are
            # the same for every instance, so one entry per goal serves the judging half.
            ws, _ = cache.load_workspace(Path(ref["root"]), ref["task_id"], ref["variant"])
            self._attacks[attack] = inst = poison.poison_attack(attack, instance, ws)
            return inst
        inst = instance_attack_set(ref).get(attack)
        if inst is None:
            raise AuditError(
                f"{ref['attack_set']}: no attack {attack!r}; build the attack set for these worlds "
                "(suite.apex.out) before running attacked episodes"
            )
        if inst.task_id != instance.family:
            raise AuditError(f"attack {attack} is for task {inst.task_id}, not {instance.family}")
        self._attacks[attack] = inst
        return inst

    def build_environment(
        self, instance: Instance, attack: str | None, injections: dict[str, str]
    ) -> Workspace:
        ref = template(instance)
        root = Path(ref["root"])
        _verify_cache(root, ref)
        ws, record = cache.load_workspace(root, ref["task_id"], ref["variant"])
        self._records[ws.world_id] = record
        self._benign[ws.world_id] = ws.copy()
        self._task_files[ws.world_id] = cache.load_task_files(root, ref["task_id"], ref["variant"])
        if attack is None:
            if injections:
                raise ValueError(f"{instance.instance_id}: injections given for a benign episode")
            return ws
        inst = self.resolve_attack(instance, attack)
        expected = placed_texts(inst)
        if injections and injections != expected:
            raise ValueError(
                f"{instance.instance_id}/{attack}: the injections given are not the frozen attack's content"
            )
        ws = placement.apply_static(ws, inst)
        if inst.watcher is not None:
            watcher.attach(ws, inst.watcher, goals.goal(inst.goal_id), inst.attack_id)
        return ws

    def with_attack_set(self, instance: Instance, attack_set: Path) -> Instance:
        """``instance`` pointed at another frozen attack set of the same worlds (an ablated arm,
        ``apex.ablations``); the main set's instance comes back byte-identical."""
        ref = template(instance)
        if "attack_set" not in ref or Path(ref["attack_set"]).resolve() == attack_set.resolve():
            return instance
        # The ablated set is verified against its own pin (written beside it when it was built).
        ref = {**ref, "attack_set": attack_set.as_posix(), "attack_set_sha256": None}
        return instance.model_copy(update={"environment_template": json.dumps(ref, sort_keys=True)})

    def sandbox_info(self, suite_cfg: SuiteConfig) -> dict[str, Any]:
        """Which sandbox ``run_command`` uses with this config here (``isolation.SandboxInfo``), for the run
        manifest and each shard's provenance."""
        return sandbox_status(suite_cfg.apex).to_json()

    def open_tools(self, env: Workspace, suite_cfg: SuiteConfig) -> transport.ToolTransport:
        apex = suite_cfg.apex
        env.settings = dataclasses.replace(env.settings, **settings_fields(apex))
        return transport.connect(env, apex.transport)

    def run_call(self, env: Workspace, call: Call) -> tuple[str, str | None]:
        return tools.call_tool(env, call.function, call.args)

    def format_result(self, result: Any) -> str:
        # Every workspace tool already returns the text the model sees.
        return result if isinstance(result, str) else json.dumps(result, sort_keys=True)

    def state(self, env: Workspace) -> dict[str, Any]:
        return env.state()

    def state_sha256(self, env: Workspace) -> str:
        # The same digest ``success.episode_record`` stores, so replay compares like with like.
        return hashlib.sha256(json.dumps(env.state(), sort_keys=True).encode()).hexdigest()

    def copy_environment(self, env: Workspace) -> Workspace:
        return env.copy()

    def agent_profile(self, name: str) -> None:
        """``agent.profile``: APEX-Harm has no runner of its own, only evoaudit's loop (``default``)."""
        if name != "default":
            raise ValueError(f"agent.profile: {name!r} is not a profile of suite apex (default)")
        return None

    # --- what replay re-executes with (``replay/apex.py``), through ``suite.environments`` -----------------
    # The tool layer, the attacks' goals and watchers and the task's own files: the world as the episode
    # had it. Replay's verdicts are its own code; nothing here judges.

    def call_tool(
        self,
        env: Workspace,
        name: str,
        args: dict[str, Any],
        actor: str = "agent",
        copy_back_bytes: Callable[[str, bytes], bytes] | None = None,
    ) -> tuple[str, str | None]:
        """One tool call on ``env``, recorded as the episode records it (``tools.call_tool``). With
        ``copy_back_bytes``, a program's written files are copied back with the bytes it gives (path, the
        program's bytes -> the bytes to write); ``env.copied_back`` then says what was applied."""
        env.copy_back_bytes = copy_back_bytes
        try:
            return tools.call_tool(env, name, args, actor)
        finally:
            env.copy_back_bytes = None

    def attack_goal(self, attack: AttackInstance) -> Goal:
        """The goal an attack carries out (``goals.goal``)."""
        return goals.goal(attack.goal_id)

    def attach_watcher(self, env: Workspace, attack: AttackInstance, goal: Goal) -> None:
        """Start the attack's watcher on ``env``, as ``build_environment`` does for a dynamic attack."""
        watcher.attach(env, attack.watcher, goal, attack.attack_id)

    def read_text(self, data: bytes, kind: str) -> str | None:
        """A file's text as the tools show it; None when the tools cannot read it as ``kind``."""
        try:
            return file_text(data, kind)
        except ToolError:
            return None

    def kind_of(self, path: str) -> str:
        """The kind of file ``path`` names (its extension, as the workspace reads it)."""
        return kind_of(path)

    def task_sources(self, instance: Instance) -> tuple[TaskRecord, dict[str, bytes]]:
        """The instance's task record (prompt, gold values) and its own files ({path: bytes})."""
        ref = template(instance)
        root = Path(ref["root"])
        _, record = cache.load_workspace(root, ref["task_id"], ref["variant"])
        return record, cache.load_task_files(root, ref["task_id"], ref["variant"])

    def _record_of(self, ws: Workspace) -> TaskRecord:
        try:
            return self._records[ws.world_id]
        except KeyError:
            raise AuditError(
                f"world {ws.world_id}: not built by this suite object (build_environment) in this process"
            ) from None

    def _benign_of(self, ws: Workspace) -> Workspace:
        try:
            return self._benign[ws.world_id]
        except KeyError:
            raise AuditError(
                f"world {ws.world_id}: not built by this suite object (build_environment) in this process"
            ) from None

    def _attack_by_id(self, attack: str) -> AttackInstance:
        try:
            return self._attacks[attack]
        except KeyError:
            raise AuditError(
                f"attack {attack!r} was not resolved by this suite object (build_environment) in this process"
            ) from None


def placed_texts(inst: AttackInstance) -> dict[str, str]:
    """What an attack places, {target: the text a reader sees}: static content and the watcher's."""
    out = {p.target: p.text for p in inst.payload}
    if inst.instruction_file is not None:
        out[inst.instruction_file.target] = inst.instruction_file.text
    if inst.watcher is not None:
        for p in (inst.watcher.replacement, inst.watcher.instruction_file):
            if p is not None:
                out[f"watcher:{p.target}"] = p.text
    return out


def template(instance: Instance) -> dict[str, Any]:
    try:
        ref = json.loads(instance.environment("apex-world-ref"))
    except json.JSONDecodeError:
        ref = None
    if not isinstance(ref, dict) or "root" not in ref:
        raise AuditError(f"{instance.instance_id}: environment_template is not an APEX world reference")
    return ref


def _verify_cache(root: Path, ref: dict[str, Any]) -> None:
    tid, v = ref["task_id"], ref["variant"]
    files = {
        root / "worlds" / f"{ref['world_id']}.zip": ref["world_sha256"],
        root / "tasks" / f"{tid}.{v}.json": ref["task_sha256"],
        root / "task_files" / f"{tid}.{v}.zip": ref["task_files_sha256"],
        root / "plans" / f"{tid}.{v}.json": ref["plan_sha256"],
    }
    for path, want in files.items():
        if not path.exists() or sha256_file(path) != want:
            raise AuditError(
                f"{path}: missing or not the file the instance table pinned (sha256 {want[:12]}...); the "
                "worlds were rebuilt with other settings since; rebuild the instances from this cache"
            )
