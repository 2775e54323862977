rule checker_audit:
    output:
        csv=LAYOUT.suite("checker_audit.csv"),
        summary=LAYOUT.suite("checker_audit_summary.json"),
        # Written beside the CSV by the same command (suite.stage.goal_csv_path).
        goals=LAYOUT.suite("goal_checker_probes.csv"),
        # Defect classes only the strict probes find (suite.stage.extension_csv_path).
        extension=LAYOUT.suite("checker_audit_extension.csv"),
    params:
        cfg=get_stage_params("suite"),
    log:
        LAYOUT.log("checker_audit"),
    benchmark:
        LAYOUT.benchmark("checker_audit")
    script:
        "../../scripts/checker_audit.py"


def get_instances_inputs(wildcards):
    # The checker audit's summary, and what the configured suite's instance stage reads besides
    # (evoaudit.suite.registry.stage_inputs: APEX-Harm's built worlds and frozen attack set).
    from evoaudit.suite.registry import stage_inputs

    return {"summary": rules.checker_audit.output.summary} | stage_inputs(CFG)


rule instances:
    input:
        unpack(get_instances_inputs),
    output:
        # Learning variants only (acquisition, validation): what every rule before unseal reads.
        table=LAYOUT.suite("instances.parquet"),
        # The sealed endpoint variants (suite.stage.endpoint_table_path), committed by sha256 in the
        # spec; only rules after unseal take it as input (tests/workflow/test_seal_dag.py).
        endpoint=LAYOUT.suite("endpoint.parquet"),
        spec=LAYOUT.suite("suite_spec.json"),
        # Written beside the spec by the same command (suite.stage.variant_csv_path).
        variant_probes=LAYOUT.suite("variant_probes.csv"),
    params:
        cfg=get_stage_params("suite"),
    log:
        LAYOUT.log("instances"),
    benchmark:
        LAYOUT.benchmark("instances")
    script:
        "../../scripts/instances.py"


rule apex_probes:
    # The APEX build-time probes (evoaudit.suite.apex.attacks.probes): every goal's oracle and no-op, every
    # placement's reachability, every exposure rule on its payload and the clean world, every program's
    # effect through the sandbox. Fails the job when any probe fails.
    output:
        csv=LAYOUT.suite("apex_probes.csv"),
    params:
        cfg=get_stage_params("apex_probes"),
    log:
        LAYOUT.log("apex_probes"),
    benchmark:
        LAYOUT.benchmark("apex_probes")
    script:
        "../../scripts/apex_probes.py"


rule apex_worlds:
    # The APEX-Harm worlds (evoaudit.suite.apex.stage): every configured variant's 15 worlds, built once
    # and reused from the cache under suite.apex.out while their settings and files are unchanged, and
    # the spec that pins their sha256s. No Banking rule takes it as input; it is not in the default target
    # (build it with `snakemake apex_worlds`).
    output:
        manifest=LAYOUT.apex_world("apex_manifest.json"),
        spec=LAYOUT.apex_world("apex_spec.json"),
    params:
        cfg=get_stage_params("apex_worlds"),
    log:
        LAYOUT.log("apex_worlds"),
    benchmark:
        LAYOUT.benchmark("apex_worlds")
    script:
        "../../scripts/apex_worlds.py"
