import json
from pathlib import Path

from evoaudit import config as evoaudit_config
from evoaudit.hashing import sha256_json
from evoaudit.methods.conditions import condition as parse_condition

# Validates against workflow/schemas/config.schema.yaml (the package's copy of it) and fills defaults;
# a bad value stops the run here, naming the field, the value and what is allowed.
CFG = evoaudit_config.from_dict(config, "config (config/config.yaml and --config overrides)")
RESULTS = "results"
RESOLVED_CONFIG = f"{RESULTS}/config/config.json"


def _write_resolved_config():
    # Written only when it changes, so its timestamp never triggers reruns; rules take their
    # rerun triggers from get_stage_params instead.
    text = json.dumps(CFG.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    path = Path(RESOLVED_CONFIG)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


_write_resolved_config()

LINEAGES = list(CFG.lineages)
METHODS = list(CFG.methods)
CONDITIONS = list(CFG.conditions)
ARMS = ["benign", "attacked"]
SHARDS = list(range(CFG.evaluation.shards))


def _alternation(ids):
    return "|".join(sorted(ids, key=len, reverse=True))


wildcard_constraints:
    lineage=_alternation(LINEAGES),
    method=_alternation(METHODS),
    condition=_alternation(CONDITIONS),
    arm="benign|attacked",
    shard=r"\d+",


# Which config sections each stage's outputs depend on: a change elsewhere does not rerun it.
_STAGE_KEYS = {
    "suite": ["suite", "roles"],
    "acquire": ["seed", "suite", "roles", "agent", "executor", "sim"],
    "evolve": ["seed", "optimizer", "sim", "agent"],
    "evaluate": ["seed", "suite", "roles", "agent", "executor", "sim", "evaluation"],
    "report": ["conditions", "lineages", "evaluation", "report"],
}


def get_stage_params(stage):
    dumped = CFG.model_dump(mode="json")
    return sha256_json({k: dumped[k] for k in _STAGE_KEYS[stage]})[:16]


def get_artifact_meta(wildcards):
    return f"{RESULTS}/artifacts/{wildcards.lineage}/{parse_condition(wildcards.condition).method}/meta.json"


def get_all_artifact_metas():
    return [f"{RESULTS}/artifacts/{l}/{m}/meta.json" for l in LINEAGES for m in METHODS]


def get_evaluate_shards():
    return [
        f"{RESULTS}/evaluate/{l}/{c}/{a}/shard{s}.jsonl"
        for l in LINEAGES for c in CONDITIONS for a in ARMS for s in SHARDS
    ]


def get_replay_reports():
    return [p.replace("/evaluate/", "/replay/").replace(".jsonl", ".json") for p in get_evaluate_shards()]


def get_final_outputs():
    return [f"{RESULTS}/report/tables/main.csv", f"{RESULTS}/report/report.md"]
