rule checker_audit:
    output:
        csv=f"{RESULTS}/suite/checker_audit.csv",
        summary=f"{RESULTS}/suite/checker_audit_summary.json",
        # Written beside the CSV by the same command (suite.stage.goal_csv_path).
        goals=f"{RESULTS}/suite/goal_checker_probes.csv",
        # Defect classes only the strict probes find (suite.stage.extension_csv_path).
        extension=f"{RESULTS}/suite/checker_audit_extension.csv",
    params:
        cfg=get_stage_params("suite"),
    log:
        f"{RESULTS}/logs/checker_audit.log",
    benchmark:
        f"{RESULTS}/benchmarks/checker_audit.tsv"
    script:
        "../../scripts/checker_audit.py"


rule instances:
    input:
        summary=rules.checker_audit.output.summary,
    output:
        # Learning variants only (acquisition, validation): what every rule before unseal reads.
        table=f"{RESULTS}/suite/instances.parquet",
        # The sealed endpoint variants (suite.stage.endpoint_table_path), committed by sha256 in the
        # spec; only rules after unseal take it as input (tests/test_seal_dag.py).
        endpoint=f"{RESULTS}/suite/endpoint.parquet",
        spec=f"{RESULTS}/suite/suite_spec.json",
        # Written beside the spec by the same command (suite.stage.variant_csv_path).
        variant_probes=f"{RESULTS}/suite/variant_probes.csv",
    params:
        cfg=get_stage_params("suite"),
    log:
        f"{RESULTS}/logs/instances.log",
    benchmark:
        f"{RESULTS}/benchmarks/instances.tsv"
    script:
        "../../scripts/instances.py"
