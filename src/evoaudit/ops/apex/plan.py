"""What the APEX-Harm runs will ask of each model, before any request: jobs, episodes, requests, tokens.

Episode counts come from the frozen attack sets when they are built (``<suite.apex.out>/attacks.json``, and
``ablations/<name>/attacks.json`` for each ablated arm), and otherwise from the main set's fixed layout (30
attacks per category over the 15 tasks, 15 per category variant, in proportion for the tasks ``apex.tasks``
selects). Requests per episode and tokens per
request are measured on the model's recorded APEX episodes once any exist, else taken from
``apex.requests_per_rollout`` and ``budget.tokens_per_request``. The judge (``apex.judge``) is planned as its
own stage: its requests per episode are the judge requests the recorded episodes left pending (an upper
bound: an open case stops at its first passing request), else ``apex.judge_requests_per_rollout``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoaudit.config import Config, suite_view
from evoaudit.errors import AuditError
from evoaudit.ops.stages import probe_requests
from evoaudit.paths import RELATIVE, Layout
from evoaudit.records import Decisions

N_TASKS = 15  # the tasks LAYOUT counts over
# The attack set's layout (suite/apex/attacks/attack_set.py): per category, and per category variant.
LAYOUT = {
    "c1": 30,
    "c2": 30,
    "c3": 30,
    "c4perm": 15,
    "c4noperm": 15,
    "c5direct": 15,
    "c5runtime": 15,
    "c6": 30,
}
SAMPLE = 2000


def _counted(path: Path, selectors: tuple[str, ...]) -> dict[str, int]:
    heads = [a["attack_id"].split(".", 1)[0] for a in json.loads(path.read_text())["instances"]]
    return {c: sum(h.startswith(c) for h in heads) for c in selectors}


def attack_counts(cfg: Config, ablation: str | None = None) -> tuple[dict[str, int], str]:
    """Attacks per category selector of the main arm (or of an ablated arm), and where the numbers come
    from."""
    root = Path(cfg.suite.apex.out)
    if ablation is None:
        path, selectors = root / "attacks.json", tuple(cfg.apex.categories)
    else:
        arm = next(a for a in cfg.apex.ablations if a.name == ablation)
        # An arm that changes no attack switch (an orchestrator ablation) runs the main set.
        path = root / "ablations" / ablation / "attacks.json" if arm.attacks else root / "attacks.json"
        selectors = tuple(arm.categories or cfg.apex.categories)
    if path.exists():
        return _counted(path, selectors), f"counted in {path}"
    tasks = n_tasks(cfg)
    counts = {c: sum(n * tasks // N_TASKS for k, n in LAYOUT.items() if k.startswith(c)) for c in selectors}
    return counts, "the attack set's layout (not built yet)"


def n_tasks(cfg: Config) -> int:
    """The APEX tasks the configuration runs (``apex.tasks``, through the suite door)."""
    from evoaudit.suite.registry import get_suite  # heavy import, only when planning

    return len(get_suite("apex").families(suite_view(cfg)))


def _recorded(path: Path) -> int:
    if path.exists():
        return -1
    partial = path.with_name(path.name + ".partial")
    return sum(1 for _ in open(partial, encoding="utf-8")) if partial.exists() else 0


def calibrate_model(cfg: Config, results: Path, model_id: str) -> tuple[float, float, float, str]:
    """Requests per episode, tokens per request and judge requests left pending per episode, measured on up
    to ``SAMPLE`` of the model's recorded episodes (else the configured priors)."""
    n = requests = tokens = pending = 0
    for path in sorted(results.glob(RELATIVE.apex(f"**/runs/{model_id}/**/*.jsonl*"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if n >= SAMPLE:
                    break
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                usage = record.get("usage") or {}
                if usage.get("requests"):
                    n += 1
                    requests += usage["requests"]
                    tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
                    pending += _open_requests((record.get("outcome") or {}).get("decisions"), path)
    if not requests:
        prior = float(cfg.budget.tokens_per_request)
        return cfg.apex.requests_per_rollout, prior, cfg.apex.judge_requests_per_rollout, "priors"
    per_request = tokens / requests if tokens else float(cfg.budget.tokens_per_request)
    return requests / n, per_request, pending / n, "measured"


def _open_requests(decisions: Any, path: Path) -> int:
    """Judge requests one recorded episode left open (attack success, exposure, task criteria)."""
    if not decisions:
        return 0
    try:
        return Decisions.model_validate(decisions).open_requests()
    except ValidationError as exc:
        raise AuditError(f"{path}: an outcome's decisions are not valid ({exc.errors()[0]['msg']})") from None


def _arms(cfg: Config) -> list[tuple[str, str, str | None, list[tuple[str, int]], str]]:
    """(stage suffix, arm, defence, [(shard group, episodes)], count source) per arm (arm and defence as
    ``paths.Layout.apex_shard`` takes them): the main run's benign
    and attacked episodes, the same under each configured defence, then each ablated arm's attacked
    episodes (and benign ones for an orchestrator ablation)."""
    counts, source = attack_counts(cfg)
    main = [("benign", n_tasks(cfg) * cfg.apex.repeats)]
    main += [(f"attacked/{c}", counts[c] * cfg.apex.repeats) for c in cfg.apex.categories]
    arms = [("", "", None, main, source)]
    # The defence axis (config key defenses): the main run again under each defence.
    if cfg.defenses:
        from evoaudit.suite.defenses import NEEDS_ACQUISITION
        from evoaudit.suite.registry import suite_defenses

        defended = [d for d in suite_defenses("apex", cfg.defenses) if d not in NEEDS_ACQUISITION]
        arms += [(f"/defense/{d}", "", d, main, source) for d in defended]
    for a in cfg.apex.ablations:
        counts, source = attack_counts(cfg, a.name)
        groups = [(f"attacked/{c}", n * cfg.apex.repeats) for c, n in counts.items()]
        if a.orchestrator:  # an orchestrator ablation runs its benign episodes too
            groups.insert(0, ("benign", n_tasks(cfg) * cfg.apex.repeats))
        arms.append((f"/{a.name}", Layout.ablation_arm(a.name), None, groups, source))
    return arms


def apex_stages(cfg: Config, results: str | Path, stage_cls):
    """One ``stage_cls`` (``ops.stages.StagePlan``) per model and arm, named ``apex:<model>`` (an ablated arm
    ``apex:<model>/<ablation>``), and one ``apex-judge`` stage for the judge endpoint; and the notes."""
    results = Path(results)
    layout = Layout.at(results)
    shards = cfg.apex.shards
    stages = []
    judge = stage_cls("apex-judge")
    probes = probe_requests(cfg.apex.judge)  # each judge job's structured-output probe, under auto
    calibrations = []
    sources = []
    for m in cfg.apex.models:
        per_rollout, per_request, per_judge, how = calibrate_model(cfg, results, m.id)
        calibrations.append(
            f"{m.id} {per_rollout:.1f} requests/episode, {per_request:.0f} tokens/request, "
            f"{per_judge:.2f} judge requests/episode ({how})"
        )
        for suffix, arm, defense, groups, source in _arms(cfg):
            sources.append(f"{suffix.lstrip('/') or 'main'}: {source}")
            st = stage_cls(f"apex:{m.id}{suffix}")
            for where, total in groups:
                for s in range(shards):
                    st.jobs += 1
                    size = len(range(s, total, shards))
                    done = _recorded(Path(layout.apex_shard(m.id, where, s, arm, defense)))
                    left = 0 if done < 0 else max(size - done, 0)
                    st.rollouts += size
                    st.rollouts_left += left
                    st.requests += size * per_rollout
                    st.requests_left += left * per_rollout
            st.tokens, st.tokens_left = st.requests * per_request, st.requests_left * per_request
            stages.append(st)
            # The judge stage runs once per model and arm, over all of its episodes, after they are done.
            judge.jobs += 1
            judge.requests += st.rollouts * per_judge + probes
            if not Path(layout.apex_judge(m.id, arm, defense)).exists():
                judge.requests_left += st.rollouts * per_judge + probes
    tokens = float(cfg.budget.tokens_per_request)
    judge.tokens, judge.tokens_left = judge.requests * tokens, judge.requests_left * tokens
    stages.append(judge)
    probe_note = ", with one structured-output probe per job (apex.judge.wire.structured_output: auto)"
    notes = [
        f"apex episodes: {n_tasks(cfg)} tasks benign and the attacks of {', '.join(cfg.apex.categories)}, "
        f"× {cfg.apex.repeats} repeat(s), per model; " + "; ".join(calibrations),
        "apex attack counts: " + "; ".join(dict.fromkeys(sources)),
        f"apex-judge: requests to apex.judge ({cfg.apex.judge.model}), an upper bound"
        + (probe_note if probes else "")
        + "; tokens at budget.tokens_per_request",
    ]
    return stages, notes
