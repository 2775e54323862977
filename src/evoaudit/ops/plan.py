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

from evoaudit.config import Config, suite_view
from evoaudit.errors import AuditError
from evoaudit.methods.conditions import round_conditions
from evoaudit.methods.registry import get_method
from evoaudit.ops.apex.plan import apex_stages
from evoaudit.ops.stages import StagePlan, probe_requests
from evoaudit.paths import RELATIVE, Layout
from evoaudit.poisoning import all_lineages  # a poisoned lineage costs what a lineage costs

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
    files = sorted(results.glob(RELATIVE.acquire("*", "rollouts.jsonl*")))
    files += sorted(results.glob(f"{RELATIVE.evaluate_root()}/**/*.jsonl*"))
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
    for inst in get_suite(cfg.suite.name).planned_instances(suite_view(cfg)):
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


@dataclass
class _Planner:
    """The stages of one configuration's plan, counted against what is already recorded under ``layout``."""

    cfg: Config
    layout: Layout
    per_rollout: float
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_vs, self.attackable = _family_counts(self.cfg)
        self.n_acq = _count(self.by_vs, self.cfg.roles.acquisition, "seen")
        self.n_val = _count(self.by_vs, self.cfg.roles.validation, "seen")

    def add(
        self, stage: StagePlan, rollouts: int, left: int, extra_requests: float = 0.0, extra_left: float = 0.0
    ):
        stage.rollouts += rollouts
        stage.rollouts_left += left
        stage.requests += rollouts * self.per_rollout + extra_requests
        stage.requests_left += left * self.per_rollout + extra_left

    def acquire(self) -> StagePlan:
        acquire = StagePlan("acquire")
        for lineage in all_lineages(self.cfg):
            acquire.jobs += 1
            done = _recorded(Path(self.layout.acquire(lineage, "rollouts.jsonl")))
            self.add(acquire, self.n_acq, 0 if done < 0 else max(self.n_acq - done, 0))
        return acquire

    def evolve_cost(self, method: str) -> tuple[int, float]:
        """One evolve job of ``method``: its validation-gate rollouts and its optimizer requests."""
        cfg = self.cfg
        calls = self.n_acq * cfg.budget.optimizer_requests_per_trajectory + probe_requests(cfg.optimizer)
        learner = get_method(method)
        # One judge call per trajectory.
        calls += self.n_acq if learner.success_label(cfg.methods_params) == "judge" else 0
        # Executor rollouts the method runs itself (SkillOpt: one validation-gate pass per update).
        return learner.validation_rollouts(cfg.methods_params, self.n_acq, self.n_val), calls

    def evolve(self) -> StagePlan:
        cfg = self.cfg
        evolve = StagePlan("evolve")
        for lineage in all_lineages(cfg):
            for method in cfg.methods:
                evolve.jobs += 1
                if not get_method(method).learns:
                    continue  # the identity artifact calls no model
                gate_rollouts, calls = self.evolve_cost(method)
                done = Path(self.layout.artifact_meta(lineage, method)).exists()
                self.add(evolve, gate_rollouts, 0 if done else gate_rollouts, calls, 0.0 if done else calls)
        if any(get_method(m).learns for m in cfg.methods):
            self.notes.append(
                "evolve requests assume budget.optimizer_requests_per_trajectory optimizer calls per "
                "acquisition trajectory, plus one judge call per trajectory where a method learns from judge "
                "labels, and, for skillopt, one validation pass per update"
                + (
                    ", plus one structured-output probe per job (optimizer.wire.structured_output: auto)"
                    if probe_requests(cfg.optimizer)
                    else ""
                )
            )
        return evolve

    def write_screen(self) -> StagePlan:
        """Write-path screens (write_defenses.screens): one job per lineage; the judge screen asks the
        optimizer once per acquisition trajectory (at most: one without tool output is kept unasked), after
        the structured-output probe its job sends first, as an evolve job does."""
        cfg = self.cfg
        screen = StagePlan("write_screen")
        if cfg.write_defenses.screens:
            judged = "llm_judge" in cfg.write_defenses.screens
            asks = self.n_acq + probe_requests(cfg.optimizer) if judged else 0
            for lineage in all_lineages(cfg):
                screen.jobs += 1
                done = Path(self.layout.screened(lineage, "record.json")).exists()
                self.add(screen, 0, 0, asks, 0.0 if done else asks)
        return screen

    def evaluate_runs(
        self,
        stage: StagePlan,
        extra_per_episode: int = 0,
        conditions: tuple[str, ...] | None = None,
        defense: str | None = None,
        round: int | None = None,
    ) -> None:
        """Every (lineage, condition, arm) of the evaluate stage into ``stage``, its shards those of
        ``defense`` or ``round`` when given (``extra_per_episode``: requests an episode makes beyond the
        calibrated ones; ``conditions``: a subset of ``cfg.conditions``)."""
        cfg, shards = self.cfg, self.cfg.evaluation.shards
        for lineage in all_lineages(cfg):
            for condition in cfg.conditions if conditions is None else conditions:
                for arm in ARMS:
                    total = _arm_total(cfg, self.by_vs, self.attackable, condition, arm)
                    left = 0
                    for s in range(shards):
                        stage.jobs += 1
                        size = shard_size(total, s, shards)
                        shard = self.layout.evaluate_shard(
                            lineage, condition, arm, s, defense=defense, round=round
                        )
                        done = _recorded(Path(shard))
                        left += 0 if done < 0 else max(size - done, 0)
                    self.add(stage, total, left, total * extra_per_episode, left * extra_per_episode)

    def evaluate(self) -> StagePlan:
        evaluate = StagePlan("evaluate")
        self.evaluate_runs(evaluate)
        return evaluate

    def defended(self) -> StagePlan:
        """The defence axis (config key defenses): the evaluate stage once more per defence, under
        results/defense/<defense>/; a stage of its own so that the undefended count reads as before. The
        tool filter asks its question once per episode before the first turn: one request more per episode."""
        from evoaudit.suite.defenses import get_defense

        cfg = self.cfg
        defended = StagePlan("defense")
        filters = [d for d in cfg.defenses if get_defense(d, 0).filters_tools]
        for defense in cfg.defenses:
            self.evaluate_runs(defended, int(defense in filters), defense=defense)
        if defended.jobs:
            self.notes.append(
                f"defense: every condition and arm again under each of defenses {list(cfg.defenses)}; a "
                "defence's added messages (repeat_user_prompt) lengthen requests, counted at the same rate"
                + (
                    "; tool_filter adds one request per episode (its question)"
                    if "tool_filter" in cfg.defenses
                    else ""
                )
                + (
                    "; llm_monitor adds one request per tool output (its screening) and one per distinct "
                    "acquisition tool output per shard (its calibration), not counted here"
                    if "llm_monitor" in cfg.defenses
                    else ""
                )
            )
        return defended

    def rounds(self) -> StagePlan:
        """Multi-round evolution (methods_params.rounds): per later round, each lineage × evolved method
        acquires and evolves again, and its artifact is evaluated under the conditions that deploy it."""
        from evoaudit.seal.coverage import round_methods

        cfg = self.cfg
        rounds = StagePlan("rounds")
        evolved = round_methods(cfg)
        deploying = tuple(round_conditions(cfg))
        for r in range(2, cfg.methods_params.rounds + 1):
            for lineage in all_lineages(cfg):
                for method in evolved:
                    rounds.jobs += 2
                    done = _recorded(
                        Path(self.layout.acquire(lineage, "rollouts.jsonl", round=r, method=method))
                    )
                    self.add(rounds, self.n_acq, 0 if done < 0 else max(self.n_acq - done, 0))
                    gate_rollouts, calls = self.evolve_cost(method)
                    done_evolve = Path(self.layout.artifact_meta(lineage, method, round=r)).exists()
                    self.add(
                        rounds,
                        gate_rollouts,
                        0 if done_evolve else gate_rollouts,
                        calls,
                        0.0 if done_evolve else calls,
                    )
            self.evaluate_runs(rounds, conditions=deploying, round=r)
        if rounds.jobs:
            self.notes.append(
                f"rounds: rounds 2..{cfg.methods_params.rounds} of {evolved} each acquire and evolve again "
                f"per lineage, and are evaluated under {list(deploying)}; evolve requests counted as in "
                "round 1"
            )
        return rounds


def make_plan(cfg: Config, results: str | Path = "results") -> Plan:
    results = Path(results)
    per_rollout, per_request, source = calibrate(cfg, results)
    planner = _Planner(cfg, Layout.at(results), per_rollout)
    screen = planner.write_screen()
    stages = [planner.acquire(), *([screen] if screen.jobs else []), planner.evolve(), planner.evaluate()]
    defended, rounds = planner.defended(), planner.rounds()
    stages += [st for st in (defended, rounds) if st.jobs]
    notes = planner.notes
    if getattr(getattr(cfg, "transfer", None), "enabled", False):
        notes.append(
            "the cross-executor transfer check (transfer.enabled, on transfer.executor) is not counted here"
        )
    replay = StagePlan("replay", jobs=len(all_lineages(cfg)))  # one job per lineage; no model request

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
