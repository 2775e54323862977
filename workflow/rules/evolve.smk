rule evolve:
    input:
        rollouts=rules.acquire.output.rollouts,
        record=rules.acquire.output.record,
        table=rules.instances.output.table,
    output:
        # update(): Snakemake leaves the previous meta.json in place (and restores it if the job fails),
        # so evolve itself sees an artifact that endpoints were unsealed with and refuses to replace it
        # (seal.redo); without the flag the file would be deleted before that check could run.
        meta=update(f"{RESULTS}/artifacts/{{lineage}}/{{method}}/meta.json"),
    params:
        cfg=get_stage_params("evolve"),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "evolve"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        f"{RESULTS}/logs/evolve/{{lineage}}/{{method}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evolve/{{lineage}}/{{method}}.tsv"
    script:
        "../../scripts/evolve.py"


# A placebo is shaped after its method's real artifact of the same lineage (structure and length).
rule placebo:
    input:
        real=f"{RESULTS}/artifacts/{{lineage}}/{{method}}/meta.json",
    output:
        meta=update(f"{RESULTS}/artifacts/{{lineage}}/placebo-{{method}}/meta.json"),
    params:
        cfg=get_stage_params("evolve"),
    log:
        f"{RESULTS}/logs/placebo/{{lineage}}/{{method}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/placebo/{{lineage}}/{{method}}.tsv"
    script:
        "../../scripts/placebo.py"
