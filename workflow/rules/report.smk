# Report: every table (CSV, parquet and an HTML page), every figure (PNG and SVG) and report.md, from the
# rollout records alone. The HTML pages and PNG figures are what `snakemake --report` shows, each with a
# caption under workflow/report/.
from evoaudit.report.names import DEFENSE_TABLE as REPORT_DEFENSE_TABLE
from evoaudit.report.names import EXTENSION_TABLES as REPORT_EXTENSION_TABLES
from evoaudit.report.names import FIGURES as REPORT_FIGURES
from evoaudit.report.names import ROLLOUT_TABLE as REPORT_ROLLOUT_TABLE
from evoaudit.report.names import ROUNDS_FIGURE as REPORT_ROUNDS_FIGURE
from evoaudit.report.names import ROUNDS_TABLE as REPORT_ROUNDS_TABLE
from evoaudit.report.names import TABLES as REPORT_TABLES
from evoaudit.report.simlabel import simulated_endpoints

# The Snakemake report opens with the workflow description; a run on the simulator opens with what its
# method effects are (mechanism checks set by sim.cues and its parameters, not measurements of a model).
report: "../report/workflow_sim.rst" if simulated_endpoints(CFG) else "../report/workflow.rst"

_REPORT_CATEGORY = {
    "main": "1 Main table",
    "per_goal": "2 Attack",
    "harm": "2 Attack",
    "lineage": "3 Robustness and sensitivity",
    "sensitivity": "3 Robustness and sensitivity",
    "placebo": "3 Robustness and sensitivity",
    "retrieval": "3 Robustness and sensitivity",
    "transfer": "4 Cross-executor transfer",
    "interface": "5 Interface diagnostics",
    "qualitative": "6 Qualitative cases",
    "diagnostics": "7 Evolution diagnostics",
    REPORT_DEFENSE_TABLE: "9 Defences (named extension)",
    REPORT_ROUNDS_TABLE: "10 Evolution rounds (named extension)",
}
# Extension tables written only when their extension runs (the defence table: config key defenses; the
# rounds table and figure: methods_params.rounds above 1).
REPORT_EXTENSIONS = [REPORT_DEFENSE_TABLE] if DEFENSES else []
REPORT_EXTENSIONS += [REPORT_ROUNDS_TABLE] if ROUNDS else []
REPORT_EXTENSION_FIGURES = [REPORT_ROUNDS_FIGURE] if ROUNDS and CFG.report.figures else []


rule report:
    input:
        rollouts=get_evaluate_shards(),
        replays=get_replay_reports(),
        transfer=get_transfer_shards(),
        defended=get_defended_evaluate_shards(),
        rounds=get_round_evaluate_shards(),
        metas=get_all_artifact_metas(later_rounds=False),
        round_metas=get_round_artifact_metas(),
        manifest=rules.freeze.output.manifest,
        spec=rules.instances.output.spec,
        audit=rules.checker_audit.output.summary,
    output:
        main=LAYOUT.report_table("main"),
        md=LAYOUT.report("report.md"),
        index=LAYOUT.report("html", "index.html"),
        csv=[LAYOUT.report_table(t) for t in REPORT_TABLES if t != "main"],
        parquet=[LAYOUT.report_table(t, "parquet") for t in REPORT_TABLES],
        extension_tables=[
            LAYOUT.report_table(t, ext) for t in REPORT_EXTENSIONS for ext in ("csv", "parquet")
        ],
        extension_pages=[
            report(
                LAYOUT.report("html", f"{t}.html"),
                caption=f"../report/{t}.rst",
                category=_REPORT_CATEGORY[t],
                labels={"table": REPORT_EXTENSION_TABLES[t][0]},
            )
            for t in REPORT_EXTENSIONS
        ],
        rollout_table=LAYOUT.report_table(REPORT_ROLLOUT_TABLE, "parquet"),
        pages=[
            report(
                LAYOUT.report("html", f"{t}.html"),
                caption=f"../report/{t}.rst",
                category=_REPORT_CATEGORY[t],
                labels={"table": REPORT_TABLES[t][0]},
            )
            for t in REPORT_TABLES
        ],
        traces=report(
            LAYOUT.report("html", "qualitative_traces.html"),
            caption="../report/qualitative_traces.rst",
            category=_REPORT_CATEGORY["qualitative"],
            labels={"table": "Qualitative traces"},
        ),
        png=[
            report(
                LAYOUT.report("figures", f"{f}.png"),
                caption=f"../report/fig_{f}.rst",
                category="Figures",
                labels={"figure": f},
            )
            for f in (REPORT_FIGURES if CFG.report.figures else [])
        ],
        svg=[LAYOUT.report("figures", f"{f}.svg") for f in (REPORT_FIGURES if CFG.report.figures else [])],
        extension_png=[
            report(
                LAYOUT.report("figures", f"{f}.png"),
                caption=f"../report/fig_{f}.rst",
                category=_REPORT_CATEGORY[REPORT_ROUNDS_TABLE],
                labels={"figure": f},
            )
            for f in REPORT_EXTENSION_FIGURES
        ],
        extension_svg=[LAYOUT.report("figures", f"{f}.svg") for f in REPORT_EXTENSION_FIGURES],
    params:
        cfg=get_stage_params("report"),
        out=LAYOUT.report(),
    log:
        LAYOUT.log("report"),
    benchmark:
        LAYOUT.benchmark("report")
    script:
        "../../scripts/report.py"


# Inspect AI eval logs of every evaluation shard, both suites (report.inspect_logs; the inspect extra):
# what `evoaudit export inspect` writes, as a target of the run.
rule export_inspect:
    input:
        shards=lambda wc: get_evaluate_shards()
        + (get_apex_benign_shards() + get_apex_attacked_shards() if CFG.apex.enabled else []),
    output:
        directory(LAYOUT.export("inspect")),
    params:
        results=RESULTS,
    log:
        LAYOUT.log("export_inspect"),
    benchmark:
        LAYOUT.benchmark("export_inspect")
    script:
        "../../scripts/export_inspect.py"


def get_export_outputs():
    if not CFG.report.inspect_logs:
        return []
    import importlib.util

    from snakemake.exceptions import WorkflowError

    if importlib.util.find_spec("inspect_ai") is None:  # stop at parse time, not after the audit
        raise WorkflowError(
            "report.inspect_logs: true needs inspect_ai, the inspect extra: pip install -e '.[inspect]' "
            "(or set report.inspect_logs: false)"
        )
    return [LAYOUT.export("inspect")]
