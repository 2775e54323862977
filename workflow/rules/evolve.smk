rule evolve:
    input:
        rollouts=rules.acquire.output.rollouts,
        record=rules.acquire.output.record,
    output:
        meta=f"{RESULTS}/artifacts/{{lineage}}/{{method}}/meta.json",
    params:
        cfg=get_stage_params("evolve"),
        out=lambda wc: f"{RESULTS}/artifacts/{wc.lineage}/{wc.method}",
    log:
        f"{RESULTS}/logs/evolve/{{lineage}}/{{method}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evolve/{{lineage}}/{{method}}.tsv"
    shell:
        "evoaudit -v evolve --config {RESOLVED_CONFIG} --lineage {wildcards.lineage} --method {wildcards.method}"
        " --acquisition {input.rollouts} --record {input.record} --out {params.out} > {log} 2>&1"
