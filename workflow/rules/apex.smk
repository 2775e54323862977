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
from evoaudit.suite.apex.attacks import ablation as evoaudit_apex_ablation

APEX_MODELS = [m.id for m in CFG.apex.models]
APEX_CATEGORIES = list(CFG.apex.categories)
APEX_SHARDS = list(range(CFG.apex.shards))
# The main attack set. Ablated arms (apex.ablations) have their own beside it, under ablations/<name>/, and
# the same rules build and run them: the `arm` wildcard is '' for the main run, 'ablations/<name>/' else.
APEX_ATTACKS = LAYOUT.apex_attacks()
APEX_ABLATIONS = [a.name for a in CFG.apex.ablations]
# The configured defences APEX-Harm runs (a suite's unsupported_defenses are left out here, and named on
# its defence page).
if DEFENSES and CFG.apex.enabled:
    from evoaudit.suite.registry import suite_defenses as evoaudit_suite_defenses

    from evoaudit.suite.defenses import NEEDS_ACQUISITION as EVOAUDIT_NEEDS_ACQUISITION

    # llm_monitor fixes its threshold on an acquisition record, which APEX-Harm's own runs do not have:
    # it runs on APEX workspaces through the audit's rules (suite.name apex), not here.
    APEX_DEFENSES = [
        d for d in evoaudit_suite_defenses("apex", DEFENSES) if d not in EVOAUDIT_NEEDS_ACQUISITION
    ]
else:
    APEX_DEFENSES = []
# The APEX-Harm defended rules' {defense}: only the defences APEX-Harm runs (the global constraint admits
# every configured one, tool_filter included); none: a pattern nothing matches.
APEX_DEFENSE_PATTERN = _alternation(APEX_DEFENSES) if APEX_DEFENSES else r"(?!)"


wildcard_constraints:
    model=_alternation([re.escape(m) for m in APEX_MODELS]),
    category=_alternation(APEX_CATEGORIES),
    arm="(?:" + "|".join([""] + [LAYOUT.ablation_arm(re.escape(n)) for n in APEX_ABLATIONS]) + ")",
    ablation=_alternation([re.escape(n) for n in APEX_ABLATIONS]) or "(?!)",


def get_apex_benign_shards():
    return [LAYOUT.apex_shard(m, "benign", s) for m in APEX_MODELS for s in APEX_SHARDS]


def get_apex_attacked_shards():
    return [
        LAYOUT.apex_shard(m, f"attacked/{c}", s)
        for m in APEX_MODELS for c in APEX_CATEGORIES for s in APEX_SHARDS
    ]


def get_apex_outputs():
    # Every shard is a target too (as in get_final_outputs): a deleted shard is redone on the next run.
    if not CFG.apex.enabled:
        return []
    return [
        LAYOUT.apex_report("tables", "apex_main.csv"),
        LAYOUT.apex("run_manifest.json"),
        LAYOUT.apex("attack_stealth.json"),
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
    benign = [LAYOUT.apex_shard(m, "benign", s, defense=defense) for m in models for s in APEX_SHARDS]
    return benign + [
        LAYOUT.apex_shard(m, f"attacked/{c}", s, defense=defense)
        for m in models for c in APEX_CATEGORIES for s in APEX_SHARDS
    ]


def get_apex_defended_replays():
    return [
        LAYOUT.apex_replay_of(p)
        for d in APEX_DEFENSES for p in get_apex_defended_shards(d)
    ]


def get_apex_defended_judged():
    return [LAYOUT.apex_judge(m, defense=d) for d in APEX_DEFENSES for m in APEX_MODELS]


def get_apex_defense_outputs():
    if not APEX_DEFENSES:
        return []
    return [
        LAYOUT.apex_report("defenses", "defense.csv"),
        *(p for d in APEX_DEFENSES for p in get_apex_defended_shards(d)),
        *get_apex_defended_replays(),
        *get_apex_defended_judged(),
    ]


def get_apex_ablation_shards(name, arm):
    # One arm's attacked shards over the ablation's categories ('' = the base arm, the main run's shards).
    cats = evoaudit_apex_ablation.categories(CFG, name)
    return [
        LAYOUT.apex_shard(m, f"attacked/{c}", s, arm) for m in APEX_MODELS for c in cats for s in APEX_SHARDS
    ]


def get_apex_ablation_benign(name, arm):
    # One arm's benign shards, for an ablation that changes the orchestrator (none for an attack-side one).
    if not evoaudit_apex_ablation.runs_benign(CFG, name):
        return []
    return [LAYOUT.apex_shard(m, "benign", s, arm) for m in APEX_MODELS for s in APEX_SHARDS]


def get_apex_arm_attacks(arm):
    # The attack set an arm runs: its own, or the main one when the ablation changes no attack switch (so
    # both arms attack the same instances).
    name = evoaudit_apex_ablation.arm_name(arm)
    if name is None or not evoaudit_apex_ablation.own_attack_set(CFG, name):
        return APEX_ATTACKS
    return LAYOUT.apex_attacks(arm)


def get_apex_ablation_tables():
    return [LAYOUT.apex_report("ablations", f"{n}.csv") for n in APEX_ABLATIONS]


def get_apex_attacks_inputs(wc):
    inputs = {"manifest": rules.apex_worlds.output.manifest, "spec": rules.apex_worlds.output.spec}
    name = evoaudit_apex_ablation.arm_name(wc.arm)
    if name is not None and evoaudit_apex_ablation.needs_benign(CFG, name):
        # Existing-file placements inject into a file the reference model's benign run read.
        m = evoaudit_apex_ablation.reference_model(CFG, name)
        inputs["benign"] = [LAYOUT.apex_shard(m, "benign", s) for s in APEX_SHARDS]
    return inputs


rule apex_attacks:
    # The frozen attack set (evoaudit.suite.apex.attacks.attack_set), built once on the endpoint variant's worlds by the
    # configured attacker (suite.apex.attacker; the simulator offline). An ablated arm's set
    # (evoaudit.suite.apex.attacks.ablation) is built on the same worlds; existing-file placements read the benign runs.
    input:
        unpack(get_apex_attacks_inputs),
    output:
        attacks=LAYOUT.apex_attacks("{arm}"),
    params:
        cfg=lambda wc: get_stage_params("apex_attacks", ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
    log:
        LAYOUT.log("apex/{arm}attacks"),
    benchmark:
        LAYOUT.benchmark("apex/{arm}attacks")
    script:
        "../../scripts/apex_attacks.py"


rule apex_benign:
    # The main run's benign episodes, and an orchestrator ablation's (its own settings, the main attack set).
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        rollouts=LAYOUT.apex_shard("{model}", "benign", "{shard}", "{arm}"),
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model, ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
        category=None,
        ablation=lambda wc: evoaudit_apex_ablation.arm_name(wc.arm),
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/{arm}{model}/benign/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/{arm}{model}/benign/shard{shard}")
    script:
        "../../scripts/apex_evaluate.py"


rule apex_attacked:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        rollouts=LAYOUT.apex_shard("{model}", "attacked/{category}", "{shard}", "{arm}"),
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model, ablation=evoaudit_apex_ablation.arm_name(wc.arm)),
        category=lambda wc: wc.category,
        ablation=lambda wc: evoaudit_apex_ablation.arm_name(wc.arm),
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/{arm}{model}/attacked/{category}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/{arm}{model}/attacked/{category}/shard{shard}")
    script:
        "../../scripts/apex_evaluate.py"


rule apex_instances:
    # The APEX instance table the replay reads (the endpoint variant's tasks over the built worlds; an
    # ablated arm's instances name its own attack set).
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=lambda wc: get_apex_arm_attacks(wc.arm),
    output:
        table=LAYOUT.apex_instances("{arm}"),
    params:
        cfg=get_stage_params("apex"),
    log:
        LAYOUT.log("apex/{arm}instances"),
    script:
        "../../scripts/apex_instances.py"


rule apex_replay:
    # Re-executes each recorded episode on a fresh world (evoaudit.replay.apex, through the Banking
    # replay stage's shard loop) and compares calls, watcher actions, outcomes and final state.
    input:
        rollouts=LAYOUT.apex_shard("{model}", "{part}", "{shard}", "{arm}"),
        table=LAYOUT.apex_instances("{arm}"),
    output:
        report=LAYOUT.apex_replay("{model}", "{part}", "{shard}", "{arm}"),
    params:
        on_mismatch=CFG.seal.replay_on_mismatch,
        # The shard is undefended: a rollout that claims a defence is a replay mismatch.
        defense=None,
    wildcard_constraints:
        part=r"benign|attacked/[a-z0-9]+",
    group:
        "replay"
    log:
        LAYOUT.log("apex/{arm}replay/{model}/{part}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/{arm}replay/{model}/{part}/shard{shard}")
    script:
        "../../scripts/apex_replay.py"


def get_apex_replays():
    return [
        LAYOUT.apex_replay_of(p)
        for p in get_apex_benign_shards() + get_apex_attacked_shards()
    ]


rule apex_manifest:
    # The orchestrator settings of these runs (step limit, no timer, non-streaming, per-response token
    # limit, failure handling), per model, with the worlds and attack set they pin.
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    output:
        manifest=LAYOUT.apex("run_manifest.json"),
    params:
        cfg=get_stage_params("apex"),
    log:
        LAYOUT.log("apex/run_manifest"),
    script:
        "../../scripts/apex_manifest.py"


rule apex_stealth:
    # The world build's stealth check (evoaudit.suite.apex.attacks.stealth) on the attack set this run uses, as the
    # configured attacker wrote it: a character n-gram classifier's AUC per vector, injected against benign.
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    output:
        stealth=LAYOUT.apex("attack_stealth.json"),
    params:
        cfg=get_stage_params("apex_attacks"),
    log:
        LAYOUT.log("apex/attack_stealth"),
    benchmark:
        LAYOUT.benchmark("apex/attack_stealth")
    script:
        "../../scripts/apex_stealth.py"


def get_apex_judged():
    return [LAYOUT.apex_judge(m) for m in APEX_MODELS]


def get_apex_judge_shards(wc):
    # The main run judges its benign and attacked shards; an ablation arm its attacked shards (and its benign
    # ones when it changes the orchestrator).
    if evoaudit_apex_ablation.arm_name(wc.arm) is None:
        benign = [LAYOUT.apex_shard(wc.model, "benign", s) for s in APEX_SHARDS]
        return benign + [LAYOUT.apex_shard(wc.model, f"attacked/{c}", s) for c in APEX_CATEGORIES for s in APEX_SHARDS]
    name = evoaudit_apex_ablation.arm_name(wc.arm)
    cats = evoaudit_apex_ablation.categories(CFG, name)
    runs = f"{LAYOUT.apex_runs(wc.arm)}/{wc.model}/"
    benign = [p for p in get_apex_ablation_benign(name, wc.arm) if p.startswith(runs)]
    return benign + [
        LAYOUT.apex_shard(wc.model, f"attacked/{c}", s, wc.arm) for c in cats for s in APEX_SHARDS
    ]


rule apex_judge:
    # What the rules left open in one model's episodes (task-score criteria; attack success and exposure),
    # sent to the judge (apex.judge; the simulator offline) through its response cache; every rollout's final
    # decisions, with the judge's request hash where it decided (evoaudit.evaluate.apex.judge). Changing the
    # judge reruns only this, the report and the ablation tables.
    input:
        shards=get_apex_judge_shards,
    output:
        decisions=LAYOUT.apex_judge("{model}", "{arm}"),
    params:
        cfg=get_stage_params("apex_judge"),
    resources:
        api_slots=(CFG.apex.judge.concurrency if CFG.apex.judge.backend != "sim" else 0),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/{arm}judge/{model}"),
    benchmark:
        LAYOUT.benchmark("apex/{arm}judge/{model}")
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
        main=LAYOUT.apex_report("tables", "apex_main.csv"),
        index=LAYOUT.apex_report("html", "index.html"),
        traces=LAYOUT.apex_report("html", "apex_traces.html"),
        csv=[LAYOUT.apex_report("tables", f"{t}.csv") for t in APEX_TABLES if t != "apex_main"],
        parquet=[LAYOUT.apex_report("tables", f"{t}.parquet") for t in APEX_TABLES],
        rollout_table=LAYOUT.apex_report("tables", f"{APEX_ROLLOUT_TABLE}.parquet"),
        pages=[
            report(
                LAYOUT.apex_report("html", f"{t}.html"),
                caption=f"../report/{t}.rst",
                category="8 APEX-Harm",
                labels={"table": APEX_TABLES[t]},
            )
            for t in APEX_TABLES
        ],
        png=[
            report(
                LAYOUT.apex_report("figures", f"{f}.png"),
                caption=f"../report/fig_{f}.rst",
                category="8 APEX-Harm",
                labels={"figure": f},
            )
            for f in APEX_FIGURES
        ],
        svg=[LAYOUT.apex_report("figures", f"{f}.svg") for f in APEX_FIGURES],
    params:
        cfg=get_stage_params("apex"),
        out=LAYOUT.apex_report(),
        # The shipped reference labels live in the package: a change to them reruns the report.
        reference=evoaudit_sha256_file(evoaudit_apex_reference),
    log:
        LAYOUT.log("apex/report"),
    benchmark:
        LAYOUT.benchmark("apex/report")
    script:
        "../../scripts/apex_report.py"


rule apex_ablation_table:
    # One ablation (apex.ablations, config/examples/apex-ablation-*.yaml): its arm's attacked shards against
    # the main run's on the same categories, in one table (evoaudit.report.apex.ablation).
    input:
        base=lambda wc: get_apex_ablation_shards(wc.ablation, ""),
        ablated=lambda wc: get_apex_ablation_shards(wc.ablation, LAYOUT.ablation_arm(wc.ablation)),
        # Orchestrator ablations only (the timer, Table 24): both arms' benign shards, for the task score.
        base_benign=lambda wc: get_apex_ablation_benign(wc.ablation, ""),
        ablated_benign=lambda wc: get_apex_ablation_benign(wc.ablation, LAYOUT.ablation_arm(wc.ablation)),
        # The ablated arm's shards are replayed like the main run's (which the main report checks).
        replays=lambda wc: [
            LAYOUT.apex_replay_of(p)
            for p in get_apex_ablation_shards(wc.ablation, LAYOUT.ablation_arm(wc.ablation))
            + get_apex_ablation_benign(wc.ablation, LAYOUT.ablation_arm(wc.ablation))
        ],
        base_attacks=APEX_ATTACKS,
        attacks=lambda wc: get_apex_arm_attacks(LAYOUT.ablation_arm(wc.ablation)),
        # Both arms' open cases decided by the same judge stage (the base arm's is the main run's).
        base_judged=get_apex_judged(),
        judged=lambda wc: [LAYOUT.apex_judge(m, LAYOUT.ablation_arm(wc.ablation)) for m in APEX_MODELS],
    output:
        csv=LAYOUT.apex_report("ablations", "{ablation}.csv"),
        parquet=LAYOUT.apex_report("ablations", "{ablation}.parquet"),
        html=report(
            LAYOUT.apex_report("ablations", "{ablation}.html"),
            caption="../report/apex_ablation.rst",
            category="8 APEX-Harm",
            subcategory="Ablations",
        ),
    params:
        cfg=lambda wc: get_stage_params("apex_attacks", ablation=wc.ablation),
    log:
        LAYOUT.log("apex/ablations/{ablation}/table"),
    script:
        "../../scripts/apex_ablation.py"


rule apex:
    # The APEX-Harm half alone: `snakemake apex` (the default target runs it with the Banking audit).
    input:
        get_apex_outputs() if CFG.apex.enabled else [LAYOUT.apex_report("tables", "apex_main.csv")],
    localrule: True


rule apex_benign_defended:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        rollouts=LAYOUT.apex_shard("{model}", "benign", "{shard}", defense="{defense}"),
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model),
        category=None,
        defense=lambda wc: wc.defense,
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/defense/{defense}/{model}/benign/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/defense/{defense}/{model}/benign/shard{shard}")
    script:
        "../../scripts/apex_evaluate.py"


rule apex_attacked_defended:
    input:
        spec=rules.apex_worlds.output.spec,
        attacks=APEX_ATTACKS,
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        rollouts=LAYOUT.apex_shard("{model}", "attacked/{category}", "{shard}", defense="{defense}"),
    params:
        cfg=lambda wc: get_stage_params("apex", model=wc.model),
        category=lambda wc: wc.category,
        defense=lambda wc: wc.defense,
    resources:
        api_slots=lambda wc: evoaudit_apex_shard.api_slots(CFG, wc.model),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/defense/{defense}/{model}/attacked/{category}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/defense/{defense}/{model}/attacked/{category}/shard{shard}")
    script:
        "../../scripts/apex_evaluate.py"


rule apex_replay_defended:
    # The defended shards re-executed like the main run's (the main run's instances: same attack set);
    # replay re-applies each rollout's recorded defence to the tool text before comparing.
    input:
        rollouts=LAYOUT.apex_shard("{model}", "{part}", "{shard}", defense="{defense}"),
        table=LAYOUT.apex_instances(),
    output:
        report=LAYOUT.apex_replay("{model}", "{part}", "{shard}", defense="{defense}"),
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
        LAYOUT.log("apex/defense/{defense}/replay/{model}/{part}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("apex/defense/{defense}/replay/{model}/{part}/shard{shard}")
    script:
        "../../scripts/apex_replay.py"


rule apex_judge_defended:
    # What the rules left open in one model's defended episodes, to the same judge as the main run's.
    input:
        shards=lambda wc: get_apex_defended_shards(wc.defense, wc.model),
    wildcard_constraints:
        defense=APEX_DEFENSE_PATTERN,
    output:
        decisions=LAYOUT.apex_judge("{model}", defense="{defense}"),
    params:
        cfg=get_stage_params("apex_judge"),
    resources:
        api_slots=(CFG.apex.judge.concurrency if CFG.apex.judge.backend != "sim" else 0),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("apex/defense/{defense}/judge/{model}"),
    benchmark:
        LAYOUT.benchmark("apex/defense/{defense}/judge/{model}")
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
        csv=LAYOUT.apex_report("defenses", "defense.csv"),
        parquet=LAYOUT.apex_report("defenses", "defense.parquet"),
        html=report(
            LAYOUT.apex_report("defenses", "defense.html"),
            caption="../report/apex_defense.rst",
            category="8 APEX-Harm",
            subcategory="Defences",
        ),
    params:
        cfg=get_stage_params("apex"),
    log:
        LAYOUT.log("apex/defense_table"),
    benchmark:
        LAYOUT.benchmark("apex/defense_table")
    script:
        "../../scripts/apex_defense.py"
