# Attacks on the evolution step (a named extension, config key poisoning, docs/poisoning.md). The poisoned
# lineages acquire, evolve, freeze, unseal, evaluate and replay through the lineage rules (common.smk adds
# them to the lineage wildcard and to the seal); here: each one's artifact contamination, measured on the
# frozen artifacts of the poisoned lineage and its clean twin, and replay's recomputation of it. No
# poisoning configured: no poisoned lineage, so no rule here can be asked for.


wildcard_constraints:
    plineage=_alternation(POISON_LINEAGES) if POISON_LINEAGES else r"(?!)",


from evoaudit.methods.contamination import covered_artifacts as _covered_artifacts


def _twin(wildcards):
    return next(p.twin for p in POISONED if p.name == wildcards.plineage)


def get_contamination_inputs(wildcards):
    twin = _twin(wildcards)
    return {
        "rollouts": LAYOUT.acquire(wildcards.plineage, "rollouts.jsonl"),
        "record": LAYOUT.acquire(wildcards.plineage, "record.json"),
        "manifests": [LAYOUT.freeze("manifest.json", l) for l in (wildcards.plineage, twin)],
        # Each later round's acquisition of the poisoned lineage, per method (methods_params.rounds).
        "later": [
            LAYOUT.acquire(wildcards.plineage, f, round=r, method=m)
            for r, covered in _covered_artifacts(CFG, wildcards.plineage, twin).items() if r > 1
            for m in dict.fromkeys(m for _, m in covered)
            for f in ("rollouts.jsonl", "record.json")
        ],
        # Every round's artifacts: the report follows contamination over rounds.
        "metas": [
            LAYOUT.artifact_meta(l, m, round=r)
            for r, covered in _covered_artifacts(CFG, wildcards.plineage, twin).items()
            for l, m in covered
        ],
    }


rule contamination:
    input:
        unpack(get_contamination_inputs),
    output:
        report=LAYOUT.poisoning("contamination", "{plineage}"),
    params:
        results=RESULTS,
        cfg=get_stage_params("poisoning"),
    localrule: True
    log:
        LAYOUT.log("poisoning/contamination/{plineage}"),
    benchmark:
        LAYOUT.benchmark("poisoning/contamination/{plineage}")
    script:
        "../../scripts/contamination.py"


rule replay_contamination:
    input:
        unpack(get_contamination_inputs),
        report=rules.contamination.output.report,
    output:
        report=LAYOUT.poisoning("replay", "{plineage}"),
    params:
        results=RESULTS,
        on_mismatch=CFG.seal.replay_on_mismatch,
    localrule: True
    log:
        LAYOUT.log("poisoning/replay/{plineage}"),
    benchmark:
        LAYOUT.benchmark("poisoning/replay/{plineage}")
    script:
        "../../scripts/replay_contamination.py"


def get_persistence_shards(wildcards):
    # The poisoned lineage's evaluated shards, then its twin's: identical episodes, both arms.
    return [
        LAYOUT.evaluate_shard(l, c, a, s)
        for l in (wildcards.plineage, _twin(wildcards)) for c in CONDITIONS for a in ARMS for s in SHARDS
    ]


# Persistence at the endpoints: the poisoning goal's check on every evaluated episode of the poisoned
# lineage and its twin (sleeper success where no injection is present).
rule persistence:
    input:
        shards=get_persistence_shards,
        endpoint=rules.instances.output.endpoint,
        spec=rules.instances.output.spec,
        manifest=ancient(LAYOUT.freeze("manifest.json", "{plineage}")),
        event=ancient(LAYOUT.freeze("unseal.json", "{plineage}")),
    output:
        report=LAYOUT.poisoning("persistence", "{plineage}"),
    params:
        results=RESULTS,
        cfg=get_stage_params("poisoning"),
    log:
        LAYOUT.log("poisoning/persistence/{plineage}"),
    benchmark:
        LAYOUT.benchmark("poisoning/persistence/{plineage}")
    script:
        "../../scripts/persistence.py"


# With write screens (write_defenses.screens) the poisoned lineages' screen records join the inputs and the
# report adds the write_defences table; without, the rule is as it was.
WRITE_DEFENCES_TABLE = (
    {"write_defences": LAYOUT.report("poisoning", "tables", "write_defences.csv")} if WRITE_SCREENS else {}
)


rule poisoning_report:
    input:
        contamination=[LAYOUT.poisoning("contamination", p) for p in POISON_LINEAGES],
        replays=[LAYOUT.poisoning("replay", p) for p in POISON_LINEAGES],
        persistence=[LAYOUT.poisoning("persistence", p) for p in POISON_LINEAGES],
        screens=[LAYOUT.screened(p, "record.json") for p in POISON_LINEAGES] if WRITE_SCREENS else [],
    output:
        md=LAYOUT.report("poisoning", "poisoning.md"),
        contamination=LAYOUT.report("poisoning", "tables", "contamination.csv"),
        persistence=LAYOUT.report("poisoning", "tables", "persistence.csv"),
        figure=LAYOUT.report("poisoning", "figures", "poisoning_contamination_utility.png"),
        **WRITE_DEFENCES_TABLE,
    params:
        cfg=get_stage_params("report"),
    localrule: True
    log:
        LAYOUT.log("poisoning/report"),
    benchmark:
        LAYOUT.benchmark("poisoning/report")
    script:
        "../../scripts/poisoning_report.py"


def get_poisoning_outputs():
    # The poisoned lineages' own evaluation is replayed like every lineage's (rule replay).
    replays = [
        LAYOUT.replay_report(p, c, a, s)
        for p in POISON_LINEAGES for c in CONDITIONS for a in ARMS for s in SHARDS
    ]
    if not POISON_LINEAGES:
        return []
    return replays + [
        LAYOUT.poisoning(kind, p)
        for kind in ("contamination", "replay", "persistence")
        for p in POISON_LINEAGES
    ] + [LAYOUT.report("poisoning", "poisoning.md")]
