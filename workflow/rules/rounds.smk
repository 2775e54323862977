# Multi-round evolution (methods_params.rounds, a named extension beside the paper's one offline pass).
# Round r >= 2 of a lineage x evolved method acquires on the learning variants with round r-1's artifact
# deployed and evolves from that artifact; the lineage's freeze covers every round (seal.coverage), so
# no endpoint variant opens before the last round is frozen; then each round's artifact is evaluated.


rule acquire_round:
    input:
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        prior=get_prior_round_meta,
    output:
        rollouts=LAYOUT.acquire("{lineage}", "rollouts.jsonl", round="{round}", method="{method}"),
        record=LAYOUT.acquire("{lineage}", "record.json", round="{round}", method="{method}"),
    wildcard_constraints:
        method=_alternation(ROUND_METHODS) if ROUND_METHODS else r"(?!)",
    params:
        cfg=get_stage_params("acquire"),
        round=lambda wc: int(wc.round),
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "acquire"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("rounds/{round}/acquire/{lineage}/{method}"),
    benchmark:
        LAYOUT.benchmark("rounds/{round}/acquire/{lineage}/{method}")
    script:
        "../../scripts/acquire.py"


rule evolve_round:
    input:
        rollouts=rules.acquire_round.output.rollouts,
        record=rules.acquire_round.output.record,
        table=rules.instances.output.table,
        prior=get_prior_round_meta,
    output:
        # update(): as rule evolve, so that an artifact endpoints were unsealed with is never replaced.
        meta=update(LAYOUT.artifact_meta("{lineage}", "{method}", round="{round}")),
    wildcard_constraints:
        method=_alternation(ROUND_METHODS) if ROUND_METHODS else r"(?!)",
    params:
        cfg=get_stage_params("evolve"),
        results=RESULTS,  # where the unseal log is: never read off a later round's path
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "evolve"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("rounds/{round}/evolve/{lineage}/{method}"),
    benchmark:
        LAYOUT.benchmark("rounds/{round}/evolve/{lineage}/{method}")
    script:
        "../../scripts/evolve.py"


# A later round's artifact on the endpoint variants, as rule evaluate runs the first round's: the same
# episodes and seeds (common random numbers across rounds), the lineage's manifest and unseal event.
rule evaluate_round:
    input:
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        endpoint=rules.instances.output.endpoint,
        manifest=ancient(rules.freeze_lineage.output.manifest),
        event=ancient(rules.unseal_lineage.output.event),
        meta=get_round_artifact_meta,
    output:
        rollouts=LAYOUT.evaluate_shard("{lineage}", "{condition}", "{arm}", "{shard}", round="{round}"),
    wildcard_constraints:
        condition=_alternation(ROUND_CONDITIONS) if ROUND_CONDITIONS else r"(?!)",
    params:
        cfg=get_stage_params("evaluate"),
        arm=lambda wc: wc.arm,
        shard=lambda wc: wc.shard,
        results=RESULTS,
    resources:
        api_slots=get_evaluate_slots,
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("rounds/{round}/evaluate/{lineage}/{condition}/{arm}/shard{shard}"),
    benchmark:
        LAYOUT.benchmark("rounds/{round}/evaluate/{lineage}/{condition}/{arm}/shard{shard}")
    script:
        "../../scripts/evaluate.py"
