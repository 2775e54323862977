"""Plan before spending: rollouts, model requests and tokens per stage, and the ``budget.max_requests`` guard.

Counts of rollouts are exact (they come from the same instance builder and episode rules the stages use);
requests and tokens are estimates: the measured means of rollouts already recorded under ``results/`` when
there are any, else ``budget.requests_per_rollout`` and ``budget.tokens_per_request``. Work already
recorded (published shards, rollouts in a ``.partial`` file, finished artifacts) is counted as done, so the
guard looks only at what a run would still spend. The plan reads instance counts only, never an endpoint
variant's content.

A job whose requests expect JSON on an openai endpoint with ``wire.structured_output: auto`` first sends the
structured-output probe (``models.openai_backend``, once per job process and endpoint): one more request per
such job (``probe_requests``), counted in its stage.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.methods.conditions import round_conditions
from evoaudit.ops.apex.plan import apex_stages
from evoaudit.ops.stages import StagePlan, probe_requests

ARMS = ("benign", "attacked")
#: Rollout records sampled to measure requests and tokens per rollout (enough for a stable mean).
CALIBRATION_SAMPLE = 400


class BudgetError(AuditError):
    """The run would spend more model requests than ``budget.max_requests`` allows."""


@dataclass
class RoleEndpoint:
    """Which endpoint one role of the configuration will call (``Config.endpoint_roles``)."""

    role: str
    backend: str
    model: str
    base_url: str | None
    name: str | None  # its name under ``endpoints``, if it is one of them

    @property
    def simulator(self) -> bool:
        return self.backend == "sim"


def role_endpoints(cfg: Config) -> list[RoleEndpoint]:
    from urllib.parse import urlsplit

    def shown(url: str | None) -> str | None:
        # Scheme, host, port and path only: user information and query strings may carry credentials.
        if not url:
            return None
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"

    return [
        RoleEndpoint(role, ep.backend, ep.model, shown(ep.base_url), cfg.endpoint_name(ep))
        for role, ep in cfg.endpoint_roles()
    ]


@dataclass
class Plan:
    stages: list[StagePlan]
    requests_per_rollout: float
    tokens_per_request: float
    calibration: str
    max_requests: int | None
    notes: list[str] = field(default_factory=list)
    endpoints: list[RoleEndpoint] = field(default_factory=list)

    @property
    def requests_left(self) -> int:
        return math.ceil(sum(s.requests_left for s in self.stages))

    @property
    def requests(self) -> int:
        return math.ceil(sum(s.requests for s in self.stages))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["total"] = {
            "rollouts": sum(s.rollouts for s in self.stages),
            "rollouts_left": sum(s.rollouts_left for s in self.stages),
            "requests": self.requests,
            "requests_left": self.requests_left,
            "tokens": math.ceil(sum(s.tokens for s in self.stages)),
            "tokens_left": math.ceil(sum(s.tokens_left for s in self.stages)),
        }
        return out


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _recorded(final: Path) -> int:
    """Rollouts already recorded for one output: all of them once published, else the partial's lines."""
    if final.exists():
        return -1  # published: everything done
    return _count_lines(final.with_name(final.name + ".partial"))


def calibrate(cfg: Config, results: Path) -> tuple[float, float, str]:
    """Mean requests per rollout and tokens per request over recorded rollouts, or the config's priors."""
    files = sorted(results.glob("acquire/*/rollouts.jsonl*")) + sorted(results.glob("evaluate/**/*.jsonl*"))
    n = requests = tokens = 0
    for path in files:
        if n >= CALIBRATION_SAMPLE:
            break
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if n >= CALIBRATION_SAMPLE:
                    break
                try:
                    usage = json.loads(line).get("usage") or {}
                except json.JSONDecodeError:
                    continue  # a torn last line of a killed job
                if usage.get("requests"):
                    n += 1
                    requests += usage["requests"]
                    tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    if n == 0 or requests == 0:
        return (
            cfg.budget.requests_per_rollout,
            float(cfg.budget.tokens_per_request),
            "config priors (budget.requests_per_rollout, budget.tokens_per_request): no rollout recorded yet",
        )
    per_request = tokens / requests if tokens else float(cfg.budget.tokens_per_request)
    return requests / n, per_request, f"measured over {n} recorded rollouts under {results}"


def _family_counts(cfg: Config) -> tuple[Counter, Counter]:
    """Instance counts per (variant, split), and per variant those that reach an injection vector."""
    from evoaudit.suite.registry import get_suite  # heavy import, only when planning

    by_variant_split: Counter = Counter()
    attackable: Counter = Counter()
    for inst in get_suite(cfg.suite.name).planned_instances(cfg):
        by_variant_split[(inst.variant, inst.split)] += 1
        attackable[inst.variant] += inst.attackable
    return by_variant_split, attackable


def _goals_for(cfg: Config, condition: str) -> int:
    """Goals of the attacked arm: placebos run only the configured subset of the audit's goals."""
    goals = list(cfg.suite.goals)
    if condition.startswith("placebo-"):
        placebo = getattr(getattr(cfg, "methods_params", None), "placebo", None)
        if placebo is not None and getattr(placebo, "goals", None):
            goals = [g for g in goals if g in placebo.goals]
    return len(goals)


def _count(by_vs: Counter, variants: tuple[str, ...], split: str | None = None) -> int:
    return sum(c for (v, s), c in by_vs.items() if v in variants and (split is None or s == split))


def _arm_total(cfg: Config, by_vs: Counter, attackable: Counter, condition: str, arm: str) -> int:
    """Episodes of one (lineage, condition, arm) of the evaluate stage (the same in every lineage)."""
    if arm == "benign":
        return _count(by_vs, cfg.roles.benign_endpoint)
    return sum(attackable[v] for v in cfg.roles.attacked_endpoint) * _goals_for(cfg, condition)


def shard_size(total: int, shard: int, shards: int) -> int:
    """Episodes of shard ``shard`` of ``shards``, dealt round-robin (``evaluate.runner.shard``)."""
    return len(range(shard, total, shards))


def evaluate_shard_episodes(cfg: Config) -> dict[tuple[str, str, int], int]:
    """Episodes of each evaluation shard, keyed (condition, arm, shard): what a shard's job can keep in
    flight at most (``ops.resources.evaluate_slots``)."""
    by_vs, attackable = _family_counts(cfg)
    shards = cfg.evaluation.shards
    return {
        (condition, arm, s): shard_size(_arm_total(cfg, by_vs, attackable, condition, arm), s, shards)
        for condition in cfg.conditions
        for arm in ARMS
        for s in range(shards)
    }


def make_plan(cfg: Config, results: str | Path = "results") -> Plan:
    results = Path(results)
    per_rollout, per_request, source = calibrate(cfg, results)
    by_vs, attackable = _family_counts(cfg)
    notes: list[str] = []

    def add(stage: StagePlan, rollouts: int, left: int, extra_requests: float = 0.0, extra_left: float = 0.0):
        stage.rollouts += rollouts
        stage.rollouts_left += left
        stage.requests += rollouts * per_rollout + extra_requests
        stage.requests_left += left * per_rollout + extra_left

    acquire = StagePlan("acquire")
    n_acq = _count(by_vs, cfg.roles.acquisition, "seen")
    for lineage in cfg.lineages:
        acquire.jobs += 1
        done = _recorded(results / "acquire" / lineage / "rollouts.jsonl")
        add(acquire, n_acq, 0 if done < 0 else max(n_acq - done, 0))

    evolve = StagePlan("evolve")
    n_val = _count(by_vs, cfg.roles.validation, "seen")

    def evolve_cost(method: str) -> tuple[int, float]:
        """One evolve job of ``method``: its validation-gate rollouts and its optimizer requests."""
        calls = n_acq * cfg.budget.optimizer_requests_per_trajectory + probe_requests(cfg.optimizer)
        mp = cfg.methods_params
        label = mp.reasoningbank.success_label if method == "reasoningbank" else mp.success_label
        calls += n_acq if label == "judge" else 0  # one judge call per trajectory before learning
        gate_rollouts = 0
        if method == "skillopt" and n_val:
            # One validation-gate pass per update: updates = minibatches × epochs.
            gate_rollouts = math.ceil(n_acq / mp.skillopt.batch_size) * mp.skillopt.epochs * n_val
        return gate_rollouts, calls

    for lineage in cfg.lineages:
        for method in cfg.methods:
            evolve.jobs += 1
            if method == "static":
                continue  # the identity artifact calls no model
            gate_rollouts, calls = evolve_cost(method)
            done = (results / "artifacts" / lineage / method / "meta.json").exists()
            add(evolve, gate_rollouts, 0 if done else gate_rollouts, calls, 0.0 if done else calls)
    if any(m != "static" for m in cfg.methods):
        notes.append(
            "evolve requests assume budget.optimizer_requests_per_trajectory optimizer calls per acquisition "
            "trajectory, plus one judge call per trajectory where a method learns from judge labels, and, "
            "for skillopt, one validation pass per update"
            + (
                ", plus one structured-output probe per job (optimizer.wire.structured_output: auto)"
                if probe_requests(cfg.optimizer)
                else ""
            )
        )

    shards = cfg.evaluation.shards

    def evaluate_runs(
        stage: StagePlan, root: Path, extra_per_episode: int = 0, conditions: tuple[str, ...] | None = None
    ) -> None:
        """Every (lineage, condition, arm) of the evaluate stage into ``stage``, its shards under ``root``
        (``extra_per_episode``: requests an episode makes beyond the calibrated ones; ``conditions``: a
        subset of ``cfg.conditions``)."""
        for lineage in cfg.lineages:
            for condition in cfg.conditions if conditions is None else conditions:
                for arm in ARMS:
                    total = _arm_total(cfg, by_vs, attackable, condition, arm)
                    left = 0
                    for s in range(shards):
                        stage.jobs += 1
                        size = shard_size(total, s, shards)
                        done = _recorded(root / lineage / condition / arm / f"shard{s}.jsonl")
                        left += 0 if done < 0 else max(size - done, 0)
                    add(stage, total, left, total * extra_per_episode, left * extra_per_episode)

    evaluate = StagePlan("evaluate")
    evaluate_runs(evaluate, results / "evaluate")

    # The defence axis (config key defenses): the evaluate stage once more per defence, under
    # results/defense/<defense>/; a stage of its own so that the undefended count reads as before. The tool
    # filter asks its question once per episode before the first turn: one request more per episode.
    from evoaudit.suite.defenses import get_defense

    defended = StagePlan("defense")
    filters = [d for d in cfg.defenses if get_defense(d, 0).filters_tools]
    for defense in cfg.defenses:
        evaluate_runs(defended, results / "defense" / defense / "evaluate", int(defense in filters))
    if defended.jobs:
        notes.append(
            f"defense: every condition and arm again under each of defenses {list(cfg.defenses)}; a "
            "defence's added messages (repeat_user_prompt) lengthen requests, counted at the same rate"
            + (
                "; tool_filter adds one request per episode (its question)"
                if "tool_filter" in cfg.defenses
                else ""
            )
        )

    # Multi-round evolution (methods_params.rounds): per later round, each lineage × evolved method
    # acquires and evolves again, and its artifact is evaluated under the conditions that deploy it.
    from evoaudit.seal.coverage import round_artifact, round_methods

    rounds = StagePlan("rounds")
    evolved = round_methods(cfg)
    deploying = tuple(round_conditions(cfg))
    for r in range(2, cfg.methods_params.rounds + 1):
        for lineage in cfg.lineages:
            for method in evolved:
                rounds.jobs += 2
                done = _recorded(
                    results / "rounds" / str(r) / "acquire" / lineage / method / "rollouts.jsonl"
                )
                add(rounds, n_acq, 0 if done < 0 else max(n_acq - done, 0))
                gate_rollouts, calls = evolve_cost(method)
                done_evolve = (results / round_artifact(r, lineage, method) / "meta.json").exists()
                add(
                    rounds,
                    gate_rollouts,
                    0 if done_evolve else gate_rollouts,
                    calls,
                    0.0 if done_evolve else calls,
                )
        evaluate_runs(rounds, results / "rounds" / str(r) / "evaluate", conditions=deploying)
    if rounds.jobs:
        notes.append(
            f"rounds: rounds 2..{cfg.methods_params.rounds} of {evolved} each acquire and evolve again per "
            f"lineage, and are evaluated under {list(deploying)}; evolve requests counted as in round 1"
        )

    if getattr(getattr(cfg, "transfer", None), "enabled", False):
        notes.append(
            "the cross-executor transfer check (transfer.enabled, on transfer.executor) is not counted here"
        )
    replay = StagePlan("replay", jobs=len(cfg.lineages))  # one job per lineage; no model request

    stages = [
        acquire,
        evolve,
        evaluate,
        *([defended] if defended.jobs else []),
        *([rounds] if rounds.jobs else []),
    ]
    stages.append(replay)
    for st in stages:
        st.tokens = st.requests * per_request
        st.tokens_left = st.requests_left * per_request
    if cfg.apex.enabled:  # APEX-Harm, one stage per model, calibrated on that model's own episodes
        apex, apex_notes = apex_stages(cfg, results, StagePlan)
        stages += apex
        notes += apex_notes
    endpoints = role_endpoints(cfg)
    if any(e.simulator for e in endpoints):
        notes.append(
            "roles on the simulator (backend sim) cost nothing: their requests and tokens are simulated"
        )
    return Plan(stages, per_rollout, per_request, source, cfg.budget.max_requests, notes, endpoints)


def format_plan(plan: Plan) -> str:
    w = max([9, *(len(s.stage) for s in plan.stages)])  # APEX stages are named for their model and arm
    head = f"{'stage':<{w}} {'jobs':>5} {'rollouts':>9} {'left':>7} "
    head += f"{'requests':>10} {'left':>9} {'tokens':>12}"
    lines = []
    if plan.endpoints:
        rw = max(len(e.role) for e in plan.endpoints)
        lines.append(f"{'role':<{rw}}  endpoint")
        for e in plan.endpoints:
            where = f"simulator {e.model} (in-process)" if e.simulator else f"{e.model} at {e.base_url}"
            named = f"endpoints.{e.name}: " if e.name else ""
            lines.append(f"{e.role:<{rw}}  {named}{where}")
        lines.append("")
    lines += [head, "-" * len(head)]
    for s in plan.stages:
        lines.append(
            f"{s.stage:<{w}} {s.jobs:>5} {s.rollouts:>9} {s.rollouts_left:>7} {math.ceil(s.requests):>10} "
            f"{math.ceil(s.requests_left):>9} {math.ceil(s.tokens):>12}"
        )
    total = plan.to_dict()["total"]
    lines.append("-" * len(head))
    lines.append(
        f"{'total':<{w}} {sum(s.jobs for s in plan.stages):>5} {total['rollouts']:>9} "
        f"{total['rollouts_left']:>7} "
        f"{total['requests']:>10} {total['requests_left']:>9} {total['tokens']:>12}"
    )
    lines.append(
        f"estimates: {plan.requests_per_rollout:.2f} requests/rollout, {plan.tokens_per_request:.0f} "
        f"tokens/request ({plan.calibration})"
    )
    lines.extend(f"note: {n}" for n in plan.notes)
    if plan.max_requests is None:
        lines.append("budget.max_requests: not set (no guard)")
    else:
        verdict = "within budget" if plan.requests_left <= plan.max_requests else "OVER BUDGET"
        lines.append(
            f"budget.max_requests: {plan.max_requests}; requests left {plan.requests_left}: {verdict}"
        )
    return "\n".join(lines)


def check_budget(plan: Plan, source: str = "config") -> None:
    """Raise BudgetError when the requests still to be made exceed ``budget.max_requests``."""
    if plan.max_requests is not None and plan.requests_left > plan.max_requests:
        by_stage = ", ".join(
            f"{s.stage} {math.ceil(s.requests_left)}" for s in plan.stages if s.requests_left
        )
        raise BudgetError(
            f"{source}: budget.max_requests is {plan.max_requests} but this run would still make about "
            f"{plan.requests_left} model requests ({by_stage}); raise budget.max_requests, or shrink the run "
            "(lineages, conditions, suite.goals), then check with `evoaudit plan`"
        )


def is_dry_run(argv: list[str]) -> bool:
    """Whether a Snakemake command line asks for a dry run (-n, -np, --dry-run, --dryrun)."""
    return any(
        a in ("--dry-run", "--dryrun") or (a[:1] == "-" and a[1:2] != "-" and a[1:].isalpha() and "n" in a)
        for a in argv
    )


def guard(cfg: Config, results: str | Path = "results", source: str = "config") -> Plan | None:
    """The workflow's start-of-run check; free when no budget is set (no instance building at all)."""
    if cfg.budget.max_requests is None:
        return None
    plan = make_plan(cfg, results)
    check_budget(plan, source)
    return plan
