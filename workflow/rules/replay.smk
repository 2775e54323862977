rule replay:
    input:
        rollouts=rules.evaluate.output.rollouts,
        table=rules.instances.output.table,
    output:
        report=f"{RESULTS}/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.json",
    params:
        on_mismatch=CFG.seal.replay_on_mismatch,
    group:
        "replay"
    log:
        f"{RESULTS}/logs/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.tsv"
    shell:
        "evoaudit -v replay --config {RESOLVED_CONFIG} --rollouts {input.rollouts} --table {input.table}"
        " --on-mismatch {params.on_mismatch} --out {output.report} > {log} 2>&1"


# Determinism check: rerun a sample of recorded rollouts through the evaluator (response cache or
# simulator) and require byte-identical records, timing fields aside.
rule verify:
    input:
        shards=get_evaluate_shards(),
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        manifests=get_lineage_manifests(),
        events=get_lineage_unseal_events(),
    output:
        report=get_verify_report(),
    params:
        cfg=get_stage_params("evaluate"),
        sample=CFG.seal.verify_sample,
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "verify"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/verify.log",
    benchmark:
        f"{RESULTS}/benchmarks/verify.tsv"
    shell:
        "evoaudit -v verify --config {RESOLVED_CONFIG} --results {RESULTS} --table {input.table}"
        " --spec {input.spec} --out {output.report} {input.shards} > {log} 2>&1"
