# Further AgentDojo suites beside the configured one (a named extension, config key extra_suites): each
# listed suite's pre-model checker audit of its official predicates under results/suites/<suite>/, and
# the checker-audit table over all of them. Empty lists add no job.


rule suite_checker_audit:
    # The listed suite's own checker audit (evoaudit.suite.registry.get_checker_audit); no model is called.
    output:
        csv=f"{RESULTS}/suites/{{xsuite}}/checker_audit.csv",
        summary=f"{RESULTS}/suites/{{xsuite}}/checker_audit_summary.json",
    params:
        cfg=get_stage_params("suite"),
    log:
        f"{RESULTS}/logs/suites/{{xsuite}}/checker_audit.log",
    benchmark:
        f"{RESULTS}/benchmarks/suites/{{xsuite}}/checker_audit.tsv"
    script:
        "../../scripts/suite_checker_audit.py"


rule checker_audit_table:
    # One row per user task of every suite in extra_suites.checker_audit (evoaudit.report.checker_audit_table).
    input:
        unpack(get_checker_audit_table_inputs),
    params:
        suites=EXTRA_AUDITS,
    output:
        csv=f"{RESULTS}/report/tables/checker_audit_suites.csv",
        md=f"{RESULTS}/report/tables/checker_audit_suites.md",
    log:
        f"{RESULTS}/logs/checker_audit_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/checker_audit_table.tsv"
    script:
        "../../scripts/checker_audit_table.py"
