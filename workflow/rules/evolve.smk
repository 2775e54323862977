# Write-path defences (write_defenses.screens; none by default): the screens drop acquisition trajectories
# before any method learns, and evolve reads the kept ones. The rule is always defined (at top level, as the
# profiles' checks read it) but only evolve asks for its outputs, and only when a screen is configured, so
# the default plan has no write_screen job.
WRITE_SCREENS = list(CFG.write_defenses.screens)
SCREEN_OUTPUT = {
    "screened": LAYOUT.screened("{lineage}", "rollouts.jsonl"),
    "screen_record": LAYOUT.screened("{lineage}", "record.json"),
}
SCREENED = SCREEN_OUTPUT if WRITE_SCREENS else {}


rule write_screen:
    input:
        rollouts=rules.acquire.output.rollouts,
        record=rules.acquire.output.record,
        table=rules.instances.output.table,
    output:
        rollouts=SCREEN_OUTPUT["screened"],
        record=SCREEN_OUTPUT["screen_record"],
    params:
        cfg=get_stage_params("write_screen"),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "write_screen"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("write_screen/{lineage}"),
    benchmark:
        LAYOUT.benchmark("write_screen/{lineage}")
    script:
        "../../scripts/write_screen.py"


rule evolve:
    input:
        rollouts=rules.acquire.output.rollouts,
        record=rules.acquire.output.record,
        table=rules.instances.output.table,
        **SCREENED,
    output:
        # update(): Snakemake leaves the previous meta.json in place (and restores it if the job fails),
        # so evolve itself sees an artifact that endpoints were unsealed with and refuses to replace it
        # (seal.redo); without the flag the file would be deleted before that check could run.
        meta=update(LAYOUT.artifact_meta("{lineage}", "{method}")),
    params:
        cfg=get_stage_params("evolve"),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "evolve"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("evolve/{lineage}/{method}"),
    benchmark:
        LAYOUT.benchmark("evolve/{lineage}/{method}")
    script:
        "../../scripts/evolve.py"


# A placebo is shaped after its method's real artifact of the same lineage (structure and length).
rule placebo:
    input:
        real=LAYOUT.artifact_meta("{lineage}", "{method}"),
    output:
        meta=update(LAYOUT.artifact_meta("{lineage}", "placebo-{method}")),
    params:
        cfg=get_stage_params("evolve"),
    log:
        LAYOUT.log("placebo/{lineage}/{method}"),
    benchmark:
        LAYOUT.benchmark("placebo/{lineage}/{method}")
    script:
        "../../scripts/placebo.py"
