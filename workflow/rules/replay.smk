# One job per lineage replays all of its shards: replaying a shard takes a fraction of a second, starting a
# job (interpreter, package imports) several, so a job per shard spent most of the stage starting up.
rule replay:
    input:
        rollouts=get_lineage_evaluate_shards,
        # The endpoint file opens through the seal here too: its hash in the spec, the unseal event.
        endpoint=rules.instances.output.endpoint,
        spec=rules.instances.output.spec,
        manifest=ancient(rules.freeze_lineage.output.manifest),
        event=ancient(rules.unseal_lineage.output.event),
    output:
        reports=get_lineage_replay_outputs(),
    params:
        on_mismatch=CFG.seal.replay_on_mismatch,
        results=RESULTS,
        defenses=get_lineage_shard_defenses(),
    group:
        "replay"
    log:
        LAYOUT.log("replay/{lineage}"),
    benchmark:
        LAYOUT.benchmark("replay/{lineage}")
    script:
        "../../scripts/replay.py"


# Determinism check: rerun a sample of recorded rollouts through the evaluator (response cache or
# simulator) and require byte-identical records, timing fields aside. The sample is drawn over the
# undefended shards and, with defences configured, the defended ones too.
rule verify:
    input:
        shards=get_evaluate_shards() + get_defended_evaluate_shards(),
        table=rules.instances.output.table,
        endpoint=rules.instances.output.endpoint,
        spec=rules.instances.output.spec,
        manifests=get_lineage_manifests(),
        events=get_lineage_unseal_events(),
    output:
        report=get_verify_report(),
    params:
        cfg=get_stage_params("evaluate"),
        sample=CFG.seal.verify_sample,
        results=RESULTS,
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "verify"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("verify"),
    benchmark:
        LAYOUT.benchmark("verify")
    script:
        "../../scripts/verify.py"
