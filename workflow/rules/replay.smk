rule replay:
    input:
        rollouts=rules.evaluate.output.rollouts,
        table=rules.instances.output.table,
    output:
        report=f"{RESULTS}/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.json",
    log:
        f"{RESULTS}/logs/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/replay/{{lineage}}/{{condition}}/{{arm}}/shard{{shard}}.tsv"
    shell:
        "evoaudit -v replay --config {RESOLVED_CONFIG} --rollouts {input.rollouts} --table {input.table}"
        " --out {output.report} > {log} 2>&1"
