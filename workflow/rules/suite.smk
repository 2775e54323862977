rule checker_audit:
    output:
        csv=f"{RESULTS}/suite/checker_audit.csv",
        summary=f"{RESULTS}/suite/checker_audit_summary.json",
        # Written beside the CSV by the same command (suite.stage.goal_csv_path).
        goals=f"{RESULTS}/suite/goal_checker_probes.csv",
    params:
        cfg=get_stage_params("suite"),
    log:
        f"{RESULTS}/logs/checker_audit.log",
    benchmark:
        f"{RESULTS}/benchmarks/checker_audit.tsv"
    shell:
        "evoaudit -v audit-checkers --config {RESOLVED_CONFIG} --csv {output.csv} --summary {output.summary} > {log} 2>&1"


rule instances:
    input:
        summary=rules.checker_audit.output.summary,
    output:
        table=f"{RESULTS}/suite/instances.parquet",
        spec=f"{RESULTS}/suite/suite_spec.json",
        # Written beside the spec by the same command (suite.stage.variant_csv_path).
        variant_probes=f"{RESULTS}/suite/variant_probes.csv",
    params:
        cfg=get_stage_params("suite"),
    log:
        f"{RESULTS}/logs/instances.log",
    benchmark:
        f"{RESULTS}/benchmarks/instances.tsv"
    shell:
        "evoaudit -v instances --config {RESOLVED_CONFIG} --audit-summary {input.summary}"
        " --table {output.table} --spec {output.spec} > {log} 2>&1"
