"""What the APEX-Harm runs will ask of each model, before any request: jobs, episodes, requests, tokens.

Episode counts come from the frozen attack set when it is built (``<suite.apex.out>/attacks.json``), and
otherwise from the set's fixed layout (30 attacks per category over the 15 tasks; 15 per category variant).
Requests per episode and tokens per request are measured on the model's recorded APEX episodes once any
exist, else taken from ``apex.requests_per_rollout`` and ``budget.tokens_per_request``.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.config import Config

N_TASKS = 15
# The attack set's layout (suite/apex/attacks.py): per category, and per category variant.
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


def attack_counts(cfg: Config) -> tuple[dict[str, int], str]:
    """Attacks per configured category selector, and where the numbers come from."""
    path = Path(cfg.suite.apex.out) / "attacks.json"
    if path.exists():
        ids = [a["attack_id"] for a in json.loads(path.read_text())["instances"]]
        heads = [i.split(".", 1)[0] for i in ids]
        return {c: sum(h.startswith(c) for h in heads) for c in cfg.apex.categories}, f"counted in {path}"
    counts = {c: sum(n for k, n in LAYOUT.items() if k.startswith(c)) for c in cfg.apex.categories}
    return counts, "the attack set's layout (not built yet)"


def _recorded(path: Path) -> int:
    if path.exists():
        return -1
    partial = path.with_name(path.name + ".partial")
    return sum(1 for _ in open(partial, encoding="utf-8")) if partial.exists() else 0


def calibrate_model(cfg: Config, results: Path, model_id: str) -> tuple[float, float, str]:
    n = requests = tokens = 0
    for path in sorted((results / "apex" / "runs" / model_id).glob("**/*.jsonl*")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if n >= SAMPLE:
                    break
                try:
                    usage = json.loads(line).get("usage") or {}
                except json.JSONDecodeError:
                    continue
                if usage.get("requests"):
                    n += 1
                    requests += usage["requests"]
                    tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    if not requests:
        return cfg.apex.requests_per_rollout, float(cfg.budget.tokens_per_request), "priors"
    return requests / n, (tokens / requests if tokens else float(cfg.budget.tokens_per_request)), "measured"


def apex_stages(cfg: Config, results: str | Path, stage_cls):
    """One ``stage_cls`` (ops.plan.StagePlan) per model, named ``apex:<model>``; and the notes."""
    results = Path(results)
    counts, source = attack_counts(cfg)
    shards = cfg.apex.shards
    stages = []
    calibrations = []
    for m in cfg.apex.models:
        st = stage_cls(f"apex:{m.id}")
        per_rollout, per_request, how = calibrate_model(cfg, results, m.id)
        calibrations.append(
            f"{m.id} {per_rollout:.1f} requests/episode, {per_request:.0f} tokens/request ({how})"
        )
        outputs = [("benign", N_TASKS * cfg.apex.repeats)]
        outputs += [(f"attacked/{c}", counts[c] * cfg.apex.repeats) for c in cfg.apex.categories]
        for where, total in outputs:
            for s in range(shards):
                st.jobs += 1
                size = len(range(s, total, shards))
                done = _recorded(results / "apex" / "runs" / m.id / where / f"shard{s}.jsonl")
                left = 0 if done < 0 else max(size - done, 0)
                st.rollouts += size
                st.rollouts_left += left
                st.requests += size * per_rollout
                st.requests_left += left * per_rollout
        st.tokens, st.tokens_left = st.requests * per_request, st.requests_left * per_request
        stages.append(st)
    notes = [
        f"apex episodes: 15 tasks benign and the attacks of {', '.join(cfg.apex.categories)} ({source}), "
        f"× {cfg.apex.repeats} repeat(s), per model; " + "; ".join(calibrations),
        "apex judge requests (apex.judge) are not counted",
    ]
    return stages, notes
