# Further AgentDojo suites beside the configured one (a named extension, config key extra_suites): each
# listed suite's pre-model checker audit of its official predicates under results/suites/<suite>/, and
# the checker-audit table over all of them. Empty lists add no job.


rule suite_checker_audit:
    # The listed suite's own checker audit (evoaudit.suite.registry.get_checker_audit); no model is called.
    output:
        csv=LAYOUT.extra_suite("{xsuite}", "checker_audit.csv"),
        summary=LAYOUT.extra_suite("{xsuite}", "checker_audit_summary.json"),
    params:
        cfg=get_stage_params("suite"),
    log:
        LAYOUT.log("suites/{xsuite}/checker_audit"),
    benchmark:
        LAYOUT.benchmark("suites/{xsuite}/checker_audit")
    script:
        "../../scripts/suite_checker_audit.py"


rule checker_audit_table:
    # One row per user task of every suite in extra_suites.checker_audit (evoaudit.report.checker_audit_table).
    input:
        unpack(get_checker_audit_table_inputs),
    params:
        suites=EXTRA_AUDITS,
    output:
        csv=LAYOUT.report_table("checker_audit_suites", "csv"),
        md=LAYOUT.report_table("checker_audit_suites", "md"),
    log:
        LAYOUT.log("checker_audit_table"),
    benchmark:
        LAYOUT.benchmark("checker_audit_table")
    script:
        "../../scripts/checker_audit_table.py"
