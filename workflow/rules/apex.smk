# APEX-Harm in the workflow (config `apex:`): the frozen attack set → benign runs [model, shard] → attacked
# runs [model, category, shard] → judge [model] (what rules leave open, per arm) → replay of every shard → run manifest → report. The episodes go through the Banking audit's runner
# (evoaudit.evaluate.apex.shard → evaluate.runner.run_specs: shard writer, resume keys, excluded share), with
# the same api_slots resource, logs, benchmarks and SLURM profile. Nothing here is an input of a Banking rule.
import re

from evoaudit.evaluate.apex import shard as evoaudit_apex_shard
from evoaudit.report.apex.report import FIGURES as APEX_FIGURES
from evoaudit.report.apex.report import TABLES as APEX_TABLES
from evoaudit.report.apex.report import ROLLOUT_TABLE as APEX_ROLLOUT_TABLE
from evoaudit.report.apex.report import REFERENCE_LABELS as evoaudit_apex_reference
from evoaudit.hashing import sha256_file as evoaudit_sha256_file
from evoaudit.suite.apex import ablation as evoaudit_apex_ablation

APEX_MODELS = [m.id for m in CFG.apex.models]
APEX_CATEGORIES = list(CFG.apex.categories)
APEX_SHARDS = list(range(CFG.apex.shards))
APEX = f"{RESULTS}/apex"
# The main attack set. Ablated arms (apex.ablations) have their own beside it, under ablations/<name>/, and
# the same rules build and run them: the `arm` wildcard is '' for the main run, 'ablations/<name>/' else.
APEX_ATTACKS = f"{CFG.suite.apex.out}/attacks.json"
APEX_ABLATIONS = [a.name for a in CFG.apex.ablations]
# The configured defences APEX-Harm runs (a suite's unsupported_defenses are left out here, and named on
# its defence page).
if DEFENSES and CFG.apex.enabled:
    from evoaudit.suite.registry import suite_defenses as evoaudit_suite_defenses

    APEX_DEFENSES = evoaudit_suite_defenses("apex", DEFENSES)
else:
    APEX_DEFENSES = []
# The APEX-Harm defended rules' {defense}: only the defences APEX-Harm runs (the global constraint admits
# every configured one, tool_filter included); none: a pattern nothing matches.
APEX_DEFENSE_PATTERN = _alternation(APEX_DEFENSES) if APEX_DEFENSES else r"(?!)"


wildcard_constraints:
    model=_alternation([re.escape(m) for m in APEX_MODELS]),
    category=_alternation(APEX_CATEGORIES),
    arm="(?:" + "|".join([""] + [f"ablations/{re.escape(n)}/" for n in APEX_ABLATIONS]) + ")",
    ablation=_alternation([re.escape(n) for n in APEX_ABLATIONS]) or "(?!)",


def get_apex_benign_shards():
    return [f"{APEX}/runs/{m}/benign/shard{s}.jsonl" for m in APEX_MODELS for s in APEX_SHARDS]


def get_apex_attacked_shards():
    return [
        f"{APEX}/runs/{m}/attacked/{c}/shard{s}.jsonl"
        for m in APEX_MODELS for c in APEX_CATEGORIES for s in APEX_SHARDS
    ]


def get_apex_outputs():
    # Every shard is a target too (as in get_final_outputs): a deleted shard is redone on the next run.
    if not CFG.apex.enabled:
        return []
    return [
        f"{APEX}/report/tables/apex_main.csv",
        f"{APEX}/run_manifest.json",
        f"{APEX}/attack_stealth.json",
        *get_apex_benign_shards(),
        *get_apex_attacked_shards(),
        *get_apex_replays(),
        *get_apex_ablation_tables(),
        *get_apex_judged(),
        *get_apex_defense_outputs(),
    ]


# The defence axis (config key defenses, a named extension): the main run's benign and attacked shards again
# under each defence, under apex/defense/<defense>/, replayed and judged like the main run's, and one
# defence table against the main run (evoaudit.report.apex.defense).
def get_apex_defended_shards(defense, model=None):
    models = APEX_MODELS if model is None else [model]
    benign = [f"{APEX}/defense/{defense}/runs/{m}/benign/shard{s}.jsonl" for m in models for s in APEX_SHARDS]
    return benign + [
        f"{APEX}/defense/{defense}/runs/{m}/attacked/{c}/shard{s}.jsonl"
        for m in models for c in APEX_CATEGORIES for s in APEX_SHARDS
    ]


def get_apex_defended_replays():
    return [
        p.replace("/runs/", "/replay/").replace(".jsonl", ".json")
        for d in APEX_DEFENSES for p in get_apex_defended_shards(d)
    ]


def get_apex_defended_judged():
    return [f"{APEX}/defense/{d}/judge/{m}.json" for d in APEX_DEFENSES for m in APEX_MODELS]


def get_apex_defense_outputs():
    if not APEX_DEFENSES:
        return []
    return [
        f"{APEX}/report/defenses/defense.csv",
        *(p for d in APEX_DEFENSES for p in get_apex_defended_shards(d)),
        *get_apex_defended_replays(),
        *get_apex_defended_judged(),
    ]


def get_apex_ablation_shards(name, arm):
    # One arm's attacked shards over the ablation's categories ('' = the base arm, the main run's shards).
    cats = evoaudit_apex_ablation.categories(CFG, name)
    return [
        f"{APEX}/{arm}runs/{m}/attacked/{c}/shard{s}.jsonl" for m in APEX_MODELS for c in cats for s in APEX_SHARDS
    ]


def get_apex_ablation_benign(name, arm):
    # One arm's benign shards, for an ablation that changes the orchestrator (none for an attack-side one).
    if not evoaudit_apex_ablation.runs_benign(CFG, name):
        return []
    return [f"{APEX}/{arm}runs/{m}/benign/shard{s}.jsonl" for m in APEX_MODELS for s in APEX_SHARDS]


def get_apex_arm_attacks(arm):
    # The attack set an arm runs: its own, or the main one when the ablation changes no attack switch (so
    # both arms attack the same instances).
    name = evoaudit_apex_ablation.arm_name(arm)
    if name is None or not evoaudit_apex_ablation.own_attack_set(CFG, name):
        return APEX_ATTACKS
    return f"{CFG.suite.apex.out}/{arm}attacks.json"


def get_apex_ablation_tables():
    return [f"{APEX}/report/ablations/{n}.csv" for n in APEX_ABLATIONS]


def get_apex_attacks_inputs(wc):
    inputs = {"manifest": rules.apex_worlds.output.manifest, "spec": rules.apex_worlds.output.spec}
    name = evoaudit_apex_ablation.arm_name(wc.arm)
    if name is not None and evoaudit_apex_ablation.needs_benign(CFG, name):
        # Existing-file placements inject into a file the reference model's benign run read.
        m = evoaudit_apex_ablation.reference_model(CFG, name)
        inputs["benign"] = [f"{APEX}/runs/{m}/benign/shard{s}.jsonl" for s in APEX_SHARDS]
    return inputs


rule apex_attacks:
    # The frozen attack set (evoaudit.suite.apex.attacks), built once on the endpoint variant's worlds by the
    # configured attacker (suite.apex.attacker; the simulator offline). An ablated arm's set
    # (evoaudit.suite.apex.ablation) is built on the same worlds; existing-file placements read the benign runs.
    input:
        unpack(get_apex_attacks_inputs),
    output:
        attacks=f"{CFG.suite.apex.out}/{{arm}}attacks.json",
    params:
        cfg=lambda wc: get_stage_params("apex_attacks", ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
    log:
        f"{RESULTS}/logs/apex/{{arm}}attacks.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/{{arm}}attacks.tsv"
    script:
        "../../scripts/apex_attacks.py"


rule apex_benign:
    # The main run's benign episodes, and an orchestrator ablation's (its own settings, the main attack set).
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        rollouts=f"{APEX}/{{arm}}runs/{{model}}/benign/shard{{shard}}.jsonl",
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model, ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
        category=None,
        ablation=lambda wc: evoaudit_apex_ablation.arm_name(wc.arm),
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/{{arm}}{{model}}/benign/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/{{arm}}{{model}}/benign/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_evaluate.py"


rule apex_attacked:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        rollouts=f"{APEX}/{{arm}}runs/{{model}}/attacked/{{category}}/shard{{shard}}.jsonl",
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model, ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
        category=lambda wc: wc.category,
        ablation=lambda wc: evoaudit_apex_ablation.arm_name(wc.arm),
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/{{arm}}{{model}}/attacked/{{category}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/{{arm}}{{model}}/attacked/{{category}}/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_evaluate.py"


rule apex_instances:
    # The APEX instance table the replay reads (the endpoint variant's tasks over the built worlds; an
    # ablated arm's instances name its own attack set).
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        table=f"{APEX}/{{arm}}instances.parquet",
    params:
        cfg=get_stage_params("apex"),
    log:
        f"{RESULTS}/logs/apex/{{arm}}instances.log",
    script:
        "../../scripts/apex_instances.py"


rule apex_replay:
    # Re-executes each recorded episode on a fresh world (evoaudit.replay.apex, through the Banking
    # replay stage's shard loop) and compares calls, watcher actions, outcomes and final state.
    input:
        rollouts=f"{APEX}/{{arm}}runs/{{model}}/{{part}}/shard{{shard}}.jsonl",
        table=f"{APEX}/{{arm}}instances.parquet",
    output:
        report=f"{APEX}/{{arm}}replay/{{model}}/{{part}}/shard{{shard}}.json",
    params:
        on_mismatch=CFG.seal.replay_on_mismatch,
        # The shard is undefended: a rollout that claims a defence is a replay mismatch.
        defense=None,
    wildcard_constraints:
        part=r"benign|attacked/[a-z0-9]+",
    group:
        "replay"
    log:
        f"{RESULTS}/logs/apex/{{arm}}replay/{{model}}/{{part}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/{{arm}}replay/{{model}}/{{part}}/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_replay.py"


def get_apex_replays():
    return [
        p.replace(f"{APEX}/runs/", f"{APEX}/replay/").replace(".jsonl", ".json")
        for p in get_apex_benign_shards() + get_apex_attacked_shards()
    ]


rule apex_manifest:
    # The orchestrator settings of these runs (step limit, no timer, non-streaming, per-response token
    # limit, failure handling), per model, with the worlds and attack set they pin.
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    output:
        manifest=f"{APEX}/run_manifest.json",
    params:
        cfg=get_stage_params("apex"),
    log:
        f"{RESULTS}/logs/apex/run_manifest.log",
    script:
        "../../scripts/apex_manifest.py"


rule apex_stealth:
    # The world build's stealth check (evoaudit.suite.apex.worldtext) on the attack set this run uses, as the
    # configured attacker wrote it: a character n-gram classifier's AUC per vector, injected against benign.
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    output:
        stealth=f"{APEX}/attack_stealth.json",
    params:
        cfg=get_stage_params("apex_attacks"),
    log:
        f"{RESULTS}/logs/apex/attack_stealth.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/attack_stealth.tsv"
    script:
        "../../scripts/apex_stealth.py"


def get_apex_judged():
    return [f"{APEX}/judge/{m}.json" for m in APEX_MODELS]


def get_apex_judge_shards(wc):
    # The main run judges its benign and attacked shards; an ablation arm its attacked shards (and its benign
    # ones when it changes the orchestrator).
    if evoaudit_apex_ablation.arm_name(wc.arm) is None:
        benign = [f"{APEX}/runs/{wc.model}/benign/shard{s}.jsonl" for s in APEX_SHARDS]
        return benign + [
            f"{APEX}/runs/{wc.model}/attacked/{c}/shard{s}.jsonl" for c in APEX_CATEGORIES for s in APEX_SHARDS
        ]
    name = evoaudit_apex_ablation.arm_name(wc.arm)
    cats = evoaudit_apex_ablation.categories(CFG, name)
    benign = [p for p in get_apex_ablation_benign(name, wc.arm) if f"/runs/{wc.model}/" in p]
    return benign + [
        f"{APEX}/{wc.arm}runs/{wc.model}/attacked/{c}/shard{s}.jsonl" for c in cats for s in APEX_SHARDS
    ]


rule apex_judge:
    # What the rules left open in one model's episodes (task-score criteria; attack success and exposure),
    # sent to the judge (apex.judge; the simulator offline) through its response cache; every rollout's final
    # decisions, with the judge's request hash where it decided (evoaudit.evaluate.apex.judge). Changing the
    # judge reruns only this, the report and the ablation tables.
    input:
        shards=get_apex_judge_shards,
    output:
        decisions=f"{APEX}/{{arm}}judge/{{model}}.json",
    params:
        cfg=get_stage_params("apex_judge"),
    resources:
        api_slots=(CFG.apex.judge.concurrency if CFG.apex.judge.backend != "sim" else 0),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/{{arm}}judge/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/{{arm}}judge/{{model}}.tsv"
    script:
        "../../scripts/apex_judge.py"


rule apex_report:
    input:
        benign=get_apex_benign_shards(),
        attacked=get_apex_attacked_shards(),
        judged=get_apex_judged(),
        attacks=APEX_ATTACKS,
        manifest=rules.apex_manifest.output.manifest,
        stealth=rules.apex_stealth.output.stealth,
        labels=list(CFG.apex.label_files),
        replays=get_apex_replays(),
    output:
        main=f"{APEX}/report/tables/apex_main.csv",
        index=f"{APEX}/report/html/index.html",
        traces=f"{APEX}/report/html/apex_traces.html",
        csv=[f"{APEX}/report/tables/{t}.csv" for t in APEX_TABLES if t != "apex_main"],
        parquet=[f"{APEX}/report/tables/{t}.parquet" for t in APEX_TABLES],
        rollout_table=f"{APEX}/report/tables/{APEX_ROLLOUT_TABLE}.parquet",
        pages=[
            report(
                f"{APEX}/report/html/{t}.html",
                caption=f"../report/{t}.rst",
                category="8 APEX-Harm",
                labels={"table": APEX_TABLES[t]},
            )
            for t in APEX_TABLES
        ],
        png=[
            report(
                f"{APEX}/report/figures/{f}.png",
                caption=f"../report/fig_{f}.rst",
                category="8 APEX-Harm",
                labels={"figure": f},
            )
            for f in APEX_FIGURES
        ],
        svg=[f"{APEX}/report/figures/{f}.svg" for f in APEX_FIGURES],
    params:
        cfg=get_stage_params("apex"),
        out=f"{APEX}/report",
        # The shipped reference labels live in the package: a change to them reruns the report.
        reference=evoaudit_sha256_file(evoaudit_apex_reference),
    log:
        f"{RESULTS}/logs/apex/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/report.tsv"
    script:
        "../../scripts/apex_report.py"


rule apex_ablation_table:
    # One ablation (apex.ablations, config/examples/apex-ablation-*.yaml): its arm's attacked shards against
    # the main run's on the same categories, in one table (evoaudit.report.apex.ablation).
    input:
        base=lambda wc: get_apex_ablation_shards(wc.ablation, ""),
        ablated=lambda wc: get_apex_ablation_shards(wc.ablation, f"ablations/{wc.ablation}/"),
        # Orchestrator ablations only (the timer, Table 24): both arms' benign shards, for the task score.
        base_benign=lambda wc: get_apex_ablation_benign(wc.ablation, ""),
        ablated_benign=lambda wc: get_apex_ablation_benign(wc.ablation, f"ablations/{wc.ablation}/"),
        # The ablated arm's shards are replayed like the main run's (which the main report checks).
        replays=lambda wc: [
            p.replace("/runs/", "/replay/").replace(".jsonl", ".json")
            for p in get_apex_ablation_shards(wc.ablation, f"ablations/{wc.ablation}/")
            + get_apex_ablation_benign(wc.ablation, f"ablations/{wc.ablation}/")
        ],
        base_attacks=APEX_ATTACKS,
        attacks=lambda wc: get_apex_arm_attacks(f"ablations/{wc.ablation}/"),
        # Both arms' open cases decided by the same judge stage (the base arm's is the main run's).
        base_judged=get_apex_judged(),
        judged=lambda wc: [f"{APEX}/ablations/{wc.ablation}/judge/{m}.json" for m in APEX_MODELS],
    output:
        csv=f"{APEX}/report/ablations/{{ablation}}.csv",
        parquet=f"{APEX}/report/ablations/{{ablation}}.parquet",
        html=report(
            f"{APEX}/report/ablations/{{ablation}}.html",
            caption="../report/apex_ablation.rst",
            category="8 APEX-Harm",
            subcategory="Ablations",
        ),
    params:
        cfg=lambda wc: get_stage_params("apex_attacks", ablation=wc.ablation),
    log:
        f"{RESULTS}/logs/apex/ablations/{{ablation}}/table.log",
    script:
        "../../scripts/apex_ablation.py"


rule apex:
    # The APEX-Harm half alone: `snakemake apex` (the default target runs it with the Banking audit).
    input:
        get_apex_outputs() if CFG.apex.enabled else [f"{APEX}/report/tables/apex_main.csv"],
    localrule: True


rule apex_benign_defended:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        rollouts=f"{APEX}/defense/{{defense}}/runs/{{model}}/benign/shard{{shard}}.jsonl",
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model),
        category=None,
        defense=lambda wc: wc.defense,
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/defense/{{defense}}/{{model}}/benign/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/defense/{{defense}}/{{model}}/benign/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_evaluate.py"


rule apex_attacked_defended:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        rollouts=f"{APEX}/defense/{{defense}}/runs/{{model}}/attacked/{{category}}/shard{{shard}}.jsonl",
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model),
        category=lambda wc: wc.category,
        defense=lambda wc: wc.defense,
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/defense/{{defense}}/{{model}}/attacked/{{category}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/defense/{{defense}}/{{model}}/attacked/{{category}}/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_evaluate.py"


rule apex_replay_defended:
    # The defended shards re-executed like the main run's (the main run's instances: same attack set);
    # replay re-applies each rollout's recorded defence to the tool text before comparing.
    input:
        rollouts=f"{APEX}/defense/{{defense}}/runs/{{model}}/{{part}}/shard{{shard}}.jsonl",
        table=f"{APEX}/instances.parquet",
    output:
        report=f"{APEX}/defense/{{defense}}/replay/{{model}}/{{part}}/shard{{shard}}.json",
    params:
        on_mismatch=CFG.seal.replay_on_mismatch,
        # The shard's defence (not each rollout's own claim): a rollout that says otherwise is a mismatch.
        defense=lambda wc: wc.defense,
    wildcard_constraints:
        part=r"benign|attacked/[a-z0-9]+",
        defense=APEX_DEFENSE_PATTERN,
    group:
        "replay"
    log:
        f"{RESULTS}/logs/apex/defense/{{defense}}/replay/{{model}}/{{part}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/defense/{{defense}}/replay/{{model}}/{{part}}/shard{{shard}}.tsv"
    script:
        "../../scripts/apex_replay.py"


rule apex_judge_defended:
    # What the rules left open in one model's defended episodes, to the same judge as the main run's.
    input:
        shards=lambda wc: get_apex_defended_shards(wc.defense, wc.model),
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        decisions=f"{APEX}/defense/{{defense}}/judge/{{model}}.json",
    params:
        cfg=get_stage_params("apex_judge"),
    resources:
        api_slots=(CFG.apex.judge.concurrency if CFG.apex.judge.backend != "sim" else 0),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/apex/defense/{{defense}}/judge/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/defense/{{defense}}/judge/{{model}}.tsv"
    script:
        "../../scripts/apex_judge.py"


rule apex_defense_table:
    # Each defence's run against the main run, per model (evoaudit.report.apex.defense).
    input:
        base=get_apex_benign_shards() + get_apex_attacked_shards(),
        base_judged=get_apex_judged(),
        defended=[p for d in APEX_DEFENSES for p in get_apex_defended_shards(d)],
        judged=get_apex_defended_judged(),
        replays=get_apex_defended_replays(),
    output:
        csv=f"{APEX}/report/defenses/defense.csv",
        parquet=f"{APEX}/report/defenses/defense.parquet",
        html=report(
            f"{APEX}/report/defenses/defense.html",
            caption="../report/apex_defense.rst",
            category="8 APEX-Harm",
            subcategory="Defences",
        ),
    params:
        cfg=get_stage_params("apex"),
    log:
        f"{RESULTS}/logs/apex/defense_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/apex/defense_table.tsv"
    script:
        "../../scripts/apex_defense.py"
