# The run's index: one page at the top of the results directory linking every report this configuration
# builds, Banking's and APEX-Harm's (evoaudit.report.run_index).
from evoaudit.report import run_index as evoaudit_run_index

_RUN_REPORTS = evoaudit_run_index.report_paths(CFG.apex.enabled, tuple(APEX_ABLATIONS), bool(APEX_DEFENSES))


rule run_index:
    input:
        # Every page it links: the index is written only once they all exist. Its content comes from the
        # configuration alone (params), so a report rebuilt does not rewrite it (ancient: existence only).
        [ancient(LAYOUT.top(path)) for path, _ in _RUN_REPORTS],
    output:
        LAYOUT.top(evoaudit_run_index.RUN_INDEX),
    params:
        results=RESULTS,
        apex=CFG.apex.enabled,
        ablations=APEX_ABLATIONS,
        defenses=bool(APEX_DEFENSES),
        notices=evoaudit_run_index.run_notices(CFG),
    localrule: True  # one small page: not worth a cluster submission
    log:
        LAYOUT.log("run_index"),
    benchmark:
        LAYOUT.benchmark("run_index")
    script:
        "../../scripts/run_index.py"
