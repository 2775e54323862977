rule evolve:
    input:
        rollouts=rules.acquire.output.rollouts,
        record=rules.acquire.output.record,
        table=rules.instances.output.table,
    output:
        meta=f"{RESULTS}/artifacts/{{lineage}}/{{method}}/meta.json",
    params:
        cfg=get_stage_params("evolve"),
        out=lambda wc: f"{RESULTS}/artifacts/{wc.lineage}/{wc.method}",
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "evolve"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/evolve/{{lineage}}/{{method}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evolve/{{lineage}}/{{method}}.tsv"
    shell:
        "evoaudit -v evolve --config {RESOLVED_CONFIG} --lineage {wildcards.lineage} --method {wildcards.method}"
        " --acquisition {input.rollouts} --record {input.record} --table {input.table} --out {params.out}"
        " > {log} 2>&1"


# A placebo is shaped after its method's real artifact of the same lineage (structure and length).
rule placebo:
    input:
        real=f"{RESULTS}/artifacts/{{lineage}}/{{method}}/meta.json",
    output:
        meta=f"{RESULTS}/artifacts/{{lineage}}/placebo-{{method}}/meta.json",
    params:
        cfg=get_stage_params("evolve"),
        real=lambda wc: f"{RESULTS}/artifacts/{wc.lineage}/{wc.method}",
        out=lambda wc: f"{RESULTS}/artifacts/{wc.lineage}/placebo-{wc.method}",
    log:
        f"{RESULTS}/logs/placebo/{{lineage}}/{{method}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/placebo/{{lineage}}/{{method}}.tsv"
    shell:
        "evoaudit -v placebo --config {RESOLVED_CONFIG} --lineage {wildcards.lineage} --method {wildcards.method}"
        " --real {params.real} --out {params.out} > {log} 2>&1"
