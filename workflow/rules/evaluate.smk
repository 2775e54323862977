rule evaluate:
    input:
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        # The sealed endpoint variants: first read here, after this lineage's unseal event.
        endpoint=rules.instances.output.endpoint,
        # ancient: waits for the seal, but a new artifact elsewhere in the lineage (another method, a
        # placebo) does not rerun this evaluation; a change of its own artifact still does, through meta.
        manifest=ancient(rules.freeze_lineage.output.manifest),
        event=ancient(rules.unseal_lineage.output.event),
        meta=get_artifact_meta,
    output:
        rollouts=LAYOUT.evaluate_shard("{lineage}", "{condition}", "{arm}", "{shard}"),
    params:
        cfg=get_stage_params("evaluate"),
        arm=lambda wc: wc.arm,
        shard=lambda wc: wc.shard,
        results=RESULTS,
    resources:
        api_slots=get_evaluate_slots,
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("evaluate/{lineage}/{condition}/{arm}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("evaluate/{lineage}/{condition}/{arm}/shard{shard}")
    script:
        "../../scripts/evaluate.py"


# llm_monitor fixes its threshold on the lineage's acquisition tool outputs (evaluate.monitor); the other
# defences read nothing more.
def get_monitor_calibration_input(wc):
    if wc.defense != "llm_monitor":
        return {}
    return {"acquisition": ancient(LAYOUT.acquire(wc.lineage, "rollouts.jsonl"))}


# The defence axis (config key defenses, a named extension): the same shard with the defence rewriting
# what the model sees (suite.defenses); the seal, the artifact and the episode seeds are the undefended
# shard's, so the report pairs the two episode for episode.
rule evaluate_defended:
    input:
        unpack(get_monitor_calibration_input),
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        endpoint=rules.instances.output.endpoint,
        manifest=ancient(rules.freeze_lineage.output.manifest),
        event=ancient(rules.unseal_lineage.output.event),
        meta=get_artifact_meta,
    output:
        rollouts=LAYOUT.evaluate_shard("{lineage}", "{condition}", "{arm}", "{shard}", defense="{defense}"),
    params:
        cfg=lambda wc: get_stage_params("evaluate", defense=wc.defense),
        arm=lambda wc: wc.arm,
        shard=lambda wc: wc.shard,
        defense=lambda wc: wc.defense,
        results=RESULTS,
    resources:
        api_slots=get_evaluate_slots,
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("defense/{defense}/evaluate/{lineage}/{condition}/{arm}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("defense/{defense}/evaluate/{lineage}/{condition}/{arm}/shard{shard}")
    script:
        "../../scripts/evaluate.py"
