rule report:
    input:
        rollouts=get_evaluate_shards(),
        replays=get_replay_reports(),
        manifest=rules.freeze.output.manifest,
        spec=rules.instances.output.spec,
    output:
        main=report(
            f"{RESULTS}/report/tables/main.csv",
            caption="../report/main.rst",
            category="Main table",
        ),
        md=f"{RESULTS}/report/report.md",
    params:
        cfg=get_stage_params("report"),
        out=f"{RESULTS}/report",
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    shell:
        "evoaudit -v report --config {RESOLVED_CONFIG} --rollouts {input.rollouts} --replays {input.replays}"
        " --manifest {input.manifest} --spec {input.spec} --out {params.out} > {log} 2>&1"
