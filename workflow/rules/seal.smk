# Seal: per-lineage manifests, the global manifest over all of them, and the unseal events.
# Evaluations read only their own lineage's manifest and unseal event, so adding a lineage later reruns
# the global chain but not the existing lineages' evaluations (their inputs stay byte-identical).
# Each job hashes a few files in about a second: on a cluster they run on the submitting host
# (localrule), where a submission would cost more than the job.


rule freeze_lineage:
    input:
        metas=get_lineage_artifact_metas,
    output:
        manifest=LAYOUT.freeze("manifest.json", "{lineage}"),
    params:
        paths=lambda wc, input: [str(Path(m).parent) for m in input.metas],
        combine=False,
        results=RESULTS,
    localrule: True
    log:
        LAYOUT.log("freeze/{lineage}"),
    benchmark:
        LAYOUT.benchmark("freeze/{lineage}")
    script:
        "../../scripts/freeze.py"


rule freeze:
    input:
        manifests=get_lineage_manifests(),
    output:
        manifest=LAYOUT.freeze("manifest.json"),
    params:
        paths=lambda wc, input: list(input.manifests),
        combine=True,
        results=RESULTS,
    localrule: True
    log:
        LAYOUT.log("freeze"),
    benchmark:
        LAYOUT.benchmark("freeze")
    script:
        "../../scripts/freeze.py"


# Global scope: one unseal event for the global root; each lineage then opens against it. The unseal
# log (freeze/unseal_log.jsonl) is deliberately not an output, so that Snakemake never deletes it.
rule unseal:
    input:
        manifest=rules.freeze.output.manifest,
    output:
        event=LAYOUT.freeze("unseal.json"),
    params:
        results=RESULTS,
    localrule: True
    log:
        LAYOUT.log("unseal"),
    benchmark:
        LAYOUT.benchmark("unseal")
    script:
        "../../scripts/unseal.py"


rule unseal_lineage:
    input:
        manifest=rules.freeze_lineage.output.manifest,
        # Global scope: wait for the global event but never rerun because it was rewritten (ancient);
        # a change of this lineage's artifacts still reaches here through its own manifest.
        gate=get_unseal_gate(),
    output:
        event=LAYOUT.freeze("unseal.json", "{lineage}"),
    params:
        scope=CFG.seal.seal_scope,
        results=RESULTS,
    localrule: True
    log:
        LAYOUT.log("unseal/{lineage}"),
    benchmark:
        LAYOUT.benchmark("unseal/{lineage}")
    script:
        "../../scripts/unseal.py"
