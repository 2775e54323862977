import json
import sys
from pathlib import Path

from evoaudit import atomic as evoaudit_atomic
from evoaudit import config as evoaudit_config
from evoaudit.methods.conditions import condition as parse_condition
from evoaudit.credentials import public_config

# The file limits of evoaudit.config.read_config_file (size, UTF-8, YAML aliases) on every configuration
# file Snakemake read; Snakemake parses them itself first (docs/operations.md, "Configuration input limits").
for _configfile in workflow.configfiles:
    evoaudit_config.read_config_file(_configfile)

# Validates against workflow/schemas/config.schema.yaml (the package's copy of it) and fills defaults;
# a bad value stops the run here, naming the field, the value and what is allowed (an unknown key: the
# file it is in, among config/config.yaml and the --configfile files, and the nearest allowed key).
CFG = evoaudit_config.from_dict(
    config, "config (config/config.yaml and --config overrides)", tuple(workflow.configfiles)
)
if CFG.suite.families is not None or CFG.apex.tasks is not None or CFG.defenses:
    # suite.families / apex.tasks name ids of their suite: an unknown one stops the run here; so does a
    # defence the audited suite cannot run.
    from evoaudit.suite.registry import check_selection

    check_selection(CFG, "config (config/config.yaml and --config overrides)")
# Each condition's insertion (or placebo) exists for its method: checked here, where the methods' code may
# load, not while the configuration itself is validated.
from evoaudit.methods.conditions import check_conditions as _check_conditions

_check_conditions(CFG, "config (config/config.yaml and --config overrides)")
# Every output of this configuration goes here (results_dir): several configurations share a checkout.
# Every path under it is spelled by evoaudit.paths.Layout (LAYOUT here, and the get_* helpers below); a rule
# file spells none itself (tests/package/test_results_layout.py).
from evoaudit.paths import Layout as _Layout

LAYOUT = _Layout.of(CFG)
RESULTS = LAYOUT.root
RESOLVED_CONFIG = LAYOUT.resolved_config()

# The run owns its results_dir (evoaudit.ops.ownership): it lies inside the checkout, the working directory
# or a configured results_roots entry, never in a system directory; and no other configuration owns it.
# Checked here, reading only (a dry run too); the owner marker is written when the run starts (onstart).
from evoaudit.ops import ownership as evoaudit_ownership

evoaudit_ownership.check_location(CFG, workflow.basedir, "config (config/config.yaml and --config overrides)")
evoaudit_ownership.check_owner(CFG, workflow.configfiles, "config (config/config.yaml and --config overrides)")

# The resolved configuration (every setting; credentials in a base_url redacted: jobs read them from the
# configuration the user wrote, never from this copy), written by rule resolved_config, not while the
# workflow is parsed: a dry run writes nothing. The text is the rule's param, so a changed configuration
# rewrites it and an unchanged one leaves it (and its timestamp) alone.
RESOLVED_CONFIG_TEXT = json.dumps(public_config(CFG.full_dump()), indent=2, sort_keys=True) + "\n"


rule resolved_config:
    output:
        RESOLVED_CONFIG,
    params:
        # A function, so that Snakemake does not read "{0,20}" in a setting (a regex) as a wildcard.
        text=lambda wildcards: RESOLVED_CONFIG_TEXT,
    localrule: True
    script:
        "../../scripts/resolved_config.py"


# Operations (docs/operations.md): `--resources api_slots=N` must cover one job's concurrency, and
# budget.max_requests stops the run before it starts; both only in the main process, not in each job.
from evoaudit.ops import plan as evoaudit_plan
from evoaudit.ops import resources as evoaudit_resources

if workflow.is_main_process:
    evoaudit_resources.check_api_budget(CFG, workflow.global_resources)
    _plan = evoaudit_plan.guard(CFG, RESULTS, "config (config/config.yaml and --config overrides)")
    # A dry run also shows what the run would spend (the executor is not known yet while parsing).
    if evoaudit_plan.is_dry_run(sys.argv):
        print(evoaudit_plan.format_plan(_plan or evoaudit_plan.make_plan(CFG, RESULTS)), file=sys.stderr)

LINEAGES = list(CFG.lineages)
# The poisoning extension (config key poisoning, docs/poisoning.md): each poisoned lineage runs every stage a
# lineage runs, beside its clean twin, and is sealed with the others; the paper's tables read LINEAGES only.
from evoaudit.poisoning import poisoned_lineages as _poisoned_lineages

POISONED = _poisoned_lineages(CFG)
POISON_LINEAGES = [p.name for p in POISONED]
SEALED_LINEAGES = LINEAGES + POISON_LINEAGES
METHODS = list(CFG.methods)
CONDITIONS = list(CFG.conditions)
ARMS = ["benign", "attacked"]
SHARDS = list(range(CFG.evaluation.shards))
# The defence axis (a named extension, config key defenses): each defence re-runs every condition and arm
# under results/defense/<defense>/; empty keeps the paper's protocol and every path as it was.
DEFENSES = list(CFG.defenses)
# Multi-round evolution (a named extension, methods_params.rounds): rounds 2.. of every evolved method,
# each under results/rounds/<r>/; one round (the paper's) keeps every path as it was.
from evoaudit.methods.conditions import round_conditions as _round_conditions
from evoaudit.seal.coverage import round_methods as _round_methods

ROUNDS = list(range(2, CFG.methods_params.rounds + 1))
# Further suites' checker audits (a named extension, extra_suites.checker_audit), gathered in one table.
EXTRA_AUDITS = list(CFG.extra_suites.checker_audit)
ROUND_METHODS = _round_methods(CFG)
ROUND_CONDITIONS = _round_conditions(CFG)  # those deploying an evolved method's own artifact


def _alternation(ids):
    return "|".join(sorted(ids, key=len, reverse=True))


wildcard_constraints:
    lineage=_alternation(SEALED_LINEAGES),
    # The further suites' names (extra_suites); none listed: a pattern nothing matches.
    xsuite=_alternation(EXTRA_AUDITS) if EXTRA_AUDITS else r"(?!)",
    method=_alternation(METHODS),
    condition=_alternation(CONDITIONS),
    arm="benign|attacked",
    shard=r"\d+",
    # No defence configured: a pattern nothing matches, so no defended rule can be asked for.
    defense=_alternation(DEFENSES) if DEFENSES else r"(?!)",
    # Likewise for a later round: one round configured, no round rule can be asked for.
    round=_alternation(map(str, ROUNDS)) if ROUNDS else r"(?!)",


def get_stage_params(stage, **which):
    # A rule's rerun trigger: the configuration its stage depends on (evoaudit.config.stage_config, the one
    # answer, which resume keys and provenance hash too), so a change elsewhere does not rerun it.
    return evoaudit_config.stage_digest(CFG, stage, **which)[:16]


def get_artifact_meta(wildcards):
    return LAYOUT.artifact_meta(wildcards.lineage, parse_condition(wildcards.condition).method)


def get_all_artifact_metas(later_rounds=True):
    # Every evolved method, plus the placebo of each method whose placebo condition is evaluated, plus each
    # later round's (methods_params.rounds): the same list unseal requires the manifest to cover
    # (evoaudit.seal.coverage). later_rounds=False: the first round's alone, the paper's tables' input.
    from evoaudit.seal.coverage import configured_artifacts

    return [LAYOUT.top(f"{a}/meta.json") for a in configured_artifacts(CFG, later_rounds=later_rounds)]


def get_round_artifact_metas():
    first = set(get_all_artifact_metas(later_rounds=False))
    return [m for m in get_all_artifact_metas() if m not in first]


def get_lineage_artifact_metas(wildcards):
    return [p for p in get_all_artifact_metas() if p.split("/")[-3] == wildcards.lineage]


def get_prior_round_meta(wildcards):
    # Round r evolves from round r-1's artifact of the same lineage and method (round 1: artifacts/).
    return LAYOUT.artifact_meta(wildcards.lineage, wildcards.method, round=int(wildcards.round) - 1)


def get_round_artifact_meta(wildcards):
    method = parse_condition(wildcards.condition).method
    return LAYOUT.artifact_meta(wildcards.lineage, method, round=int(wildcards.round))


def get_round_evaluate_shards(lineage=None):
    # Each later round's artifact on the endpoints, after the last round's freeze (empty for one round).
    lineages = [lineage] if lineage else LINEAGES
    return [
        LAYOUT.evaluate_shard(l, c, a, s, round=r)
        for r in ROUNDS for l in lineages for c in ROUND_CONDITIONS for a in ARMS for s in SHARDS
    ]


def get_lineage_manifests():
    return [LAYOUT.freeze("manifest.json", l) for l in SEALED_LINEAGES]


def get_lineage_unseal_events():
    return [LAYOUT.freeze("unseal.json", l) for l in SEALED_LINEAGES]


def get_unseal_gate():
    # seal_scope global: a lineage opens only after the global unseal; ancient() keeps a rewrite of the
    # global event (e.g. when a lineage is added) from rerunning the lineages already evaluated.
    return [ancient(LAYOUT.freeze("unseal.json"))] if CFG.seal.seal_scope == "global" else []


def get_verify_report():
    return LAYOUT.verify_report()


def get_evaluate_shards():
    return [
        LAYOUT.evaluate_shard(l, c, a, s)
        for l in LINEAGES for c in CONDITIONS for a in ARMS for s in SHARDS
    ]


def get_defended_evaluate_shards():
    # Every condition × arm × shard again under each configured defence (empty without defences).
    return [
        LAYOUT.evaluate_shard(l, c, a, s, defense=d)
        for d in DEFENSES for l in LINEAGES for c in CONDITIONS for a in ARMS for s in SHARDS
    ]


def get_evaluate_slots(wildcards):
    # An evaluation shard claims the requests it can keep in flight: fewer episodes, fewer slots.
    return evoaudit_resources.evaluate_slots(CFG, wildcards.condition, wildcards.arm, int(wildcards.shard))


def get_lineage_evaluate_shards(wildcards):
    # The lineage's undefended shards, then its defended ones (replay re-executes both).
    return [
        LAYOUT.evaluate_shard(wildcards.lineage, c, a, s)
        for c in CONDITIONS for a in ARMS for s in SHARDS
    ] + [
        LAYOUT.evaluate_shard(wildcards.lineage, c, a, s, defense=d)
        for d in DEFENSES for c in CONDITIONS for a in ARMS for s in SHARDS
    ] + get_round_evaluate_shards(wildcards.lineage)


def get_lineage_shard_defenses():
    # The defence each of get_lineage_evaluate_shards holds, in its order (None: undefended): replay holds
    # every rollout to its shard's defence, not to the rollout's own claim.
    n = len(CONDITIONS) * len(ARMS) * len(SHARDS)
    rounds = len(ROUNDS) * len(ROUND_CONDITIONS) * len(ARMS) * len(SHARDS)
    return [None] * n + [d for d in DEFENSES for _ in range(n)] + [None] * rounds


def get_lineage_replay_outputs():
    # One lineage's replay reports, in the order of get_lineage_evaluate_shards ({lineage} left open).
    return [
        LAYOUT.replay_report("{lineage}", c, a, s)
        for c in CONDITIONS for a in ARMS for s in SHARDS
    ] + [
        LAYOUT.replay_report("{lineage}", c, a, s, defense=d)
        for d in DEFENSES for c in CONDITIONS for a in ARMS for s in SHARDS
    ] + [
        LAYOUT.replay_report("{lineage}", c, a, s, round=r)
        for r in ROUNDS for c in ROUND_CONDITIONS for a in ARMS for s in SHARDS
    ]


def get_replay_reports():
    # Every re-execution check the report states: the per-shard replays (defended shards included) and,
    # when enabled, the determinism check (evoaudit report tells them apart by the verify report's path).
    shards = [
        LAYOUT.replay_of(p)
        for p in get_evaluate_shards() + get_defended_evaluate_shards() + get_round_evaluate_shards()
    ]
    return shards + ([get_verify_report()] if CFG.seal.verify_sample > 0 else [])


def get_transfer_shards():
    # Cross-executor check (workflow/rules/transfer.smk): attacked shards of the second executor.
    from evoaudit.transfer_config import active_conditions, transfer_lineages

    if not CFG.transfer.enabled:
        return []
    return [
        LAYOUT.transfer_shard(l, c)
        for l in transfer_lineages(CFG) for c in active_conditions(CFG)
    ]


def get_checker_audit_table_inputs(wildcards):
    return {
        f"{s}_{kind}": LAYOUT.extra_suite(s, f"checker_audit{suffix}")
        for s in EXTRA_AUDITS
        for kind, suffix in (("csv", ".csv"), ("summary", "_summary.json"))
    }


def get_extra_suite_outputs():
    return [LAYOUT.report_table("checker_audit_suites")] if EXTRA_AUDITS else []


def get_final_outputs():
    # Snakemake does not regenerate a deleted intermediate file while its consumers are up to date, so
    # every per-lineage record is a target too: deleting one and rerunning redoes exactly that work and
    # what depends on it.
    return [
        RESOLVED_CONFIG,
        LAYOUT.report_table("main"),
        LAYOUT.report("report.md"),
        *(LAYOUT.acquire(l, "rollouts.jsonl") for l in LINEAGES),
        *get_all_artifact_metas(),
        *get_evaluate_shards(),
        *get_defended_evaluate_shards(),
        *get_round_evaluate_shards(),
        *get_replay_reports(),
        *get_transfer_shards(),
        *get_extra_suite_outputs(),
        *get_poisoning_outputs(),  # workflow/rules/poisoning.smk; none without poisoning
    ]


# Pre-flight, before any job starts (not for a dry run): the machine has what the configured suites need
# (evoaudit.suite.machine: a sandbox for APEX-Harm's run_command, gcc for its attack set), else the run
# stops here with the install line; then each openai endpoint must answer GET /models and a one-token
# completion, serve the configured model, render tool results into the prompt and make a tool call
# (evoaudit.models.preflight), else the run stops here, in seconds, with the server's answer. An
# optimizer.max_tokens too small for a configured method's structured answer stops it first.
onstart:
    from evoaudit.methods.evolve import check_answer_budgets
    from evoaudit.models import preflight as evoaudit_preflight
    from evoaudit.suite import machine as evoaudit_machine

    check_answer_budgets(CFG)
    evoaudit_machine.check(CFG)
    evoaudit_ownership.claim(CFG, workflow.configfiles, "config (config/config.yaml and --config overrides)")
    # What the pre-flight found, per role, is kept with the run (logs/preflight.json and .log, and in
    # logs/provenance.json).
    _found = evoaudit_preflight.check(CFG)
    if (_kept := evoaudit_preflight.record(CFG, RESULTS, _found)) is not None:
        print(f"pre-flight: what each endpoint answered is in {_kept}", file=sys.stderr)
