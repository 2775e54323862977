rule acquire:
    input:
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
    output:
        rollouts=f"{RESULTS}/acquire/{{lineage}}/rollouts.jsonl",
        record=f"{RESULTS}/acquire/{{lineage}}/record.json",
    params:
        cfg=get_stage_params("acquire"),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "acquire"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/acquire/{{lineage}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/acquire/{{lineage}}.tsv"
    script:
        "../../scripts/acquire.py"
