rule acquire:
    input:
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
    output:
        rollouts=LAYOUT.acquire("{lineage}", "rollouts.jsonl"),
        record=LAYOUT.acquire("{lineage}", "record.json"),
    params:
        cfg=get_stage_params("acquire"),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "acquire"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("acquire/{lineage}"),
    benchmark:
        LAYOUT.benchmark("acquire/{lineage}")
    script:
        "../../scripts/acquire.py"
