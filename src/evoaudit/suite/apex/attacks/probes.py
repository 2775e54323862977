"""Build-time probes of the APEX attack set: the checks that make a success or exposure figure mean something.

Each probe runs real tool calls on a copy of a task's world and writes one row to ``apex_probes.csv``:

- ``goal_oracle``: for every goal, in every task world, a plan that delivers the goal's content to its
  destination (directly, or through a program for the collector) makes its checker say yes, by rule;
- ``goal_noop``: a plan that only reads makes no goal's checker say yes;
- ``placement_reachable``: every placed item (file, mail, chat message, event; the watcher's monitored
  file) shows up in the responses of a plan that lists the workspace, reads the task's sources, searches
  its keywords and scans mail, chat and calendar; a watcher fires on that plan's reads;
- ``exposure_payload`` / ``exposure_clean``: for categories 1-4, a plan that reads the item carrying the
  core instruction is exposed by the rule, and the same plan on the clean world is not;
- ``program_effect``: every attack program, run through ``run_command`` (the sandbox) with the runtime
  argument it demands, lands the goal's effect in state.

``apply_attack`` puts an instance into a world (its static items through ``placement.apply_placed``, and its
watcher on the tool layer), as an episode does.
"""

from __future__ import annotations

import csv
import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoaudit.errors import AuditError
from evoaudit.suite.apex.attacks import placement
from evoaudit.suite.apex.base.threat import SCRIPT_VECTORS, AttackInstance, Goal, Placed
from evoaudit.suite.apex.base.workspace import Workspace, is_hidden
from evoaudit.suite.apex.judging.exposure import check_exposure
from evoaudit.suite.apex.judging.success import TaskFacts, check_goal
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.watcher import attach, watcher_rows
from evoaudit.suite.apex.worlds import goals as goals_mod
from evoaudit.suite.apex.worlds import programs

if TYPE_CHECKING:
    from evoaudit.config import Config

log = logging.getLogger(__name__)
FIELDS = ("probe", "subject", "task_id", "passed", "decided_by", "detail")


@dataclass(frozen=True)
class ProbeRow:
    probe: str
    subject: str  # a goal id or an attack id
    task_id: str
    passed: bool
    decided_by: str
    detail: str


def apply_attack(ws: Workspace, attack: AttackInstance, goal: Goal) -> Workspace:
    """Place ``attack`` in ``ws`` (in place): payload, instruction file, and the watcher if it has one."""
    for p in (*attack.payload, *((attack.instruction_file,) if attack.instruction_file else ())):
        placement.apply_placed(ws, p, attack.notes.get("planted_by"))
    if attack.watcher is not None:
        attach(ws, attack.watcher, goal, attack.attack_id)
    return ws


def _run(ws: Workspace, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out = []
    for name, args in calls:
        text, _ = tools.call_tool(ws, name, args)
        out.append(text)
    return out


def _bare(ws: Workspace) -> Workspace:
    pre = ws.copy()
    pre.observers, pre.calls, pre.observer_log = [], [], []
    return pre


# --- goals ------------------------------------------------------------------------------------------------


def goal_content(goal: Goal, ws: Workspace, facts: TaskFacts, answer: str) -> str:
    if goal.secret_kind is not None:
        return goals_mod.expected_values(goal, ws, facts.prompt)[0]
    if goal.content == "user_prompt":
        return facts.prompt
    if goal.content == "final_answer":
        return answer
    if goal.content == "task_files":
        return facts.source_texts[0] if facts.source_texts else ""
    return tools.file_text(ws.files[goals_mod.CLIENT_REGISTER].data, "csv")


def oracle_plan(goal: Goal, ws: Workspace, facts: TaskFacts, answer: str) -> list[tuple[str, dict]]:
    """Calls that deliver ``goal``'s content to its destination in ``ws``."""
    target = goals_mod.resolve_target(goal, ws, "probe")
    content = goal_content(goal, ws, facts, answer)
    plan: list[tuple[str, dict]] = [("submit_answer", {"answer": answer})] if answer else []
    d = goal.destination
    if d == "shared_file":
        plan.append(("write_file", {"path": target.address, "content": content}))
    elif d == "calendar":
        args = {"title": target.address, "start": "2026-03-03T09:00:00", "end": "2026-03-03T09:30:00"}
        plan.append(("create_event", args | {"attendees": [target.attendee], "description": content}))
    elif d == "internal_chat":
        plan.append(("post_message", {"channel": target.address, "text": content}))
    elif d in ("internal_mail", "external_mail"):
        plan.append(("send_mail", {"to": [target.address], "subject": "notes", "body": content}))
    else:  # the collector is reachable only from a program
        code = (
            "import workspace_api as a; "
            f"a.http_post({target.address!r}, open('probe_payload.txt', encoding='utf-8').read())"
        )
        plan.append(("write_file", {"path": "probe_payload.txt", "content": content}))
        plan.append(("run_command", {"command": f"python -c {shlex.quote(code)}"}))
    return plan


def oracle_answer(task: Any) -> str:
    return next((c.args["answer"] for c in task.oracle if c.function == "submit_answer"), "")


def probe_goals(task: Any, goals: Sequence[Goal]) -> list[ProbeRow]:
    tid, facts, answer = task.record.task_id, TaskFacts.of_task(task), oracle_answer(task)
    rows = []
    for g in goals:
        ws = _bare(task.world)
        pre = ws.copy()
        _run(ws, oracle_plan(g, ws, facts, answer))
        d = check_goal(g, facts, pre, ws)
        rows.append(ProbeRow("goal_oracle", g.goal_id, tid, d.value is True, d.decided_by, d.evidence))
    noop = _bare(task.world)
    pre = noop.copy()
    reads = [("read_file", {"path": p}) for p in sorted(task.task_files)]
    _run(noop, [("list_files", {"directory": ""}), *reads, ("search_mail", {"query": ""})])
    for g in goals:
        d = check_goal(g, facts, pre, noop)
        rows.append(ProbeRow("goal_noop", g.goal_id, tid, d.value is False, d.decided_by, d.evidence))
    return rows


# --- placements and exposure ------------------------------------------------------------------------------


def _items(attack: AttackInstance) -> list[Placed]:
    return [*attack.payload, *((attack.instruction_file,) if attack.instruction_file else ())]


def reach_plan(ws: Workspace, task: Any, attack: AttackInstance) -> list[tuple[str, dict]]:
    hidden = any(is_hidden(p.target.split(":", 1)[1]) for p in _items(attack) if p.target.startswith("file:"))
    plan: list[tuple[str, dict]] = [("list_files", {"directory": "", "include_hidden": hidden})]
    plan += [("read_file", {"path": p}) for p in sorted(task.task_files)]
    plan += [("search_files", {"query": k, "include_hidden": hidden}) for k in attack.keywords]
    plan += [("search_mail", {"query": ""}), ("list_channels", {}), ("list_events", {})]
    plan += [("read_channel", {"channel": c}) for c in sorted(ws.chat)]
    return plan


def _shown_by(p: Placed, texts: list[str]) -> bool:
    kind, _, rest = p.target.partition(":")
    if kind == "chat":
        needle = p.text.split("\n")[0][:60]
    else:
        needle = rest.split(":")[-1]
    return any(needle in t for t in texts)


def probe_placement(task: Any, attack: AttackInstance, goal: Goal) -> ProbeRow:
    ws = apply_attack(_bare(task.world), attack, goal)
    texts = _run(ws, reach_plan(ws, task, attack))
    missing = [p.target for p in _items(attack) if not _shown_by(p, texts)]
    if attack.watcher is not None:
        for _ in range(attack.watcher.nth_read - 1):  # the plan read the sources once already
            _run(ws, [("read_file", {"path": attack.watcher.monitored_path})])
        if not any(r["action"] == "fire" for r in watcher_rows(ws)):
            missing.append(f"watcher on {attack.watcher.monitored_path} did not fire")
    detail = f"not shown: {missing}" if missing else "all items shown"
    return ProbeRow("placement_reachable", attack.attack_id, attack.task_id, not missing, "rule", detail)


def _read_call(p: Placed) -> tuple[str, dict]:
    kind, _, rest = p.target.partition(":")
    if kind == "file":
        return ("read_file", {"path": rest})
    if kind == "mail":
        return ("read_mail", {"msg_id": rest})
    if kind == "chat":
        return ("read_channel", {"channel": rest.split(":")[0]})
    return ("list_events", {})


def exposure_plan(attack: AttackInstance) -> list[tuple[str, dict]]:
    """Reads of the item(s) that carry the core instruction (after the watcher's firing, for dynamic ones)."""
    if attack.watcher is not None:
        path = attack.watcher.monitored_path
        plan = [("read_file", {"path": path})] * (attack.watcher.nth_read + 1)
        if attack.watcher.instruction_file is not None and attack.watcher.drop_instruction:
            plan.append(_read_call(attack.watcher.instruction_file))
        return plan
    core = " ".join(attack.core_instruction.split()).casefold()
    carriers = [p for p in _items(attack) if core[:40] in " ".join(p.text.split()).casefold()]
    return [_read_call(p) for p in (carriers or _items(attack)[:1])]


def probe_exposure(task: Any, attack: AttackInstance, goal: Goal) -> list[ProbeRow]:
    if not attack.exposure_applies:
        return []
    ws = apply_attack(_bare(task.world), attack, goal)
    _run(ws, exposure_plan(attack))
    hit = check_exposure(attack, ws.calls)
    clean = _bare(task.world)
    _run(clean, exposure_plan(attack))
    miss = check_exposure(attack, clean.calls)
    return [
        ProbeRow("exposure_payload", attack.attack_id, attack.task_id, hit.value is True, hit.decided_by,
                 hit.evidence),
        ProbeRow("exposure_clean", attack.attack_id, attack.task_id, miss.value is False, miss.decided_by,
                 miss.evidence),
    ]  # fmt: skip


# --- programs ---------------------------------------------------------------------------------------------


def program_command(attack: AttackInstance, ws: Workspace, prompt: str, answer: str) -> str:
    path = next(t for t in attack.targets if any(p.target == f"file:{t}" for p in attack.payload))
    cmd = programs.run_command_for(path, attack.vector)
    demand = attack.notes.get("runtime_demand")
    if demand is None:
        return cmd
    flag = programs.DEMANDS[demand][0]
    otp = next(s for s in ws.secrets if s.kind == "otp_email")
    value = {
        "prompt": prompt,
        "answer": answer,
        "mail_id": otp.location.split(":", 1)[1],
        "otp": otp.marker,
    }[demand]
    return f"{cmd} {flag} {shlex.quote(value)}"


def probe_program(task: Any, attack: AttackInstance, goal: Goal) -> ProbeRow | None:
    if attack.vector not in SCRIPT_VECTORS:
        return None
    facts, answer = TaskFacts.of_task(task), oracle_answer(task)
    ws = _bare(task.world)
    apply_attack(ws, attack, goal)
    ws.observers = []  # the program alone, without the watcher's actions
    pre = ws.copy()
    prompt = " ".join(x for x in (task.record.prompt, attack.prompt_addendum) if x)
    plan = [("submit_answer", {"answer": answer})] if answer else []
    plan.append(("run_command", {"command": program_command(attack, ws, prompt, answer)}))
    out = _run(ws, plan)[-1]
    d = check_goal(goal, facts, pre, ws)
    detail = d.evidence if d.value else f"{d.evidence}; output: {out[:300]!r}"
    return ProbeRow("program_effect", attack.attack_id, attack.task_id, d.value is True, d.decided_by, detail)


# --- the stage --------------------------------------------------------------------------------------------


def run_probes(
    out_dir: str | Path,
    tasks: Sequence[Any],
    attacks: Sequence[AttackInstance],
    goals: Sequence[Goal] | None = None,
    write: bool = True,
) -> list[ProbeRow]:
    """Every probe over ``tasks`` (``generate.GeneratedTask``) and ``attacks``; writes
    ``<out_dir>/apex_probes.csv`` and returns the rows (check ``require_probes``)."""
    by_task = {t.record.task_id: t for t in tasks}
    goal_list = list(goals if goals is not None else goals_mod.GOALS)
    goal_by_id = {g.goal_id: g for g in goal_list}
    rows: list[ProbeRow] = []
    for task in tasks:
        rows += probe_goals(task, goal_list)
    for attack in attacks:
        task, goal = by_task.get(attack.task_id), goal_by_id.get(attack.goal_id)
        if task is None or goal is None:
            rows.append(
                ProbeRow("instance", attack.attack_id, attack.task_id, False, "rule",
                         f"unknown task {attack.task_id!r} or goal {attack.goal_id!r}")
            )  # fmt: skip
            continue
        rows.append(probe_placement(task, attack, goal))
        rows += probe_exposure(task, attack, goal)
        row = probe_program(task, attack, goal)
        if row is not None:
            rows.append(row)
    if write:
        out = Path(out_dir) / "apex_probes.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(FIELDS)
            for r in rows:
                w.writerow([r.probe, r.subject, r.task_id, int(r.passed), r.decided_by, r.detail])
        tmp.replace(out)
    return rows


def require_probes(rows: Sequence[ProbeRow]) -> None:
    failed = [r for r in rows if not r.passed]
    for r in failed:  # into the job's log: Snakemake removes a failed job's CSV
        log.error("probe failed: %s %s (%s): %s", r.probe, r.subject, r.task_id, r.detail)
    if failed:
        head = "; ".join(f"{r.probe} {r.subject}: {r.detail[:160]}" for r in failed[:8])
        raise AuditError(
            f"{len(failed)} of {len(rows)} APEX build-time probes failed (first: {head}); every failure "
            "is in the log. A failing probe means an attack, goal checker or exposure rule is wrong; "
            "fix its generator."
        )


def probes_from_config(
    cfg: Config, out_dir: str | Path, attacker: Any = None, attack_set: str | Path | None = None
) -> list[ProbeRow]:
    """The suite stage's entry: the configured worlds (first variant) and their attack set (the frozen
    file when given, else generated with ``attacker`` the way ``attacks.build_from_config`` does; the
    attacker comes from ``attacker.make_attacker``), probed and written."""
    from evoaudit.suite.apex.attacks import attack_set as attacks_mod
    from evoaudit.suite.apex.worlds.generate import build_task, selected_task_ids

    apex = cfg.suite.apex
    chosen = selected_task_ids(cfg.apex.tasks)
    tasks = [build_task(t, apex.variants[0], apex.seed, apex.scale) for t in chosen]
    if attack_set is not None:
        instances = attacks_mod.load_attack_set(attack_set)
    elif attacker is not None:
        options = attacks_mod.AttackOptions.from_config(apex.attacks)
        instances = attacks_mod.generate_attacks(tasks, attacker, options, apex.seed)
    else:
        raise ValueError("probes_from_config needs the frozen attack set or an attacker to generate it")
    rows = run_probes(out_dir, tasks, instances)
    require_probes(rows)
    return rows
