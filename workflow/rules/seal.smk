# Seal: per-lineage manifests, the global manifest over all of them, and the unseal events.
# Evaluations read only their own lineage's manifest and unseal event, so adding a lineage later reruns
# the global chain but not the existing lineages' evaluations (their inputs stay byte-identical).
# Each job hashes a few files in about a second: on a cluster they run on the submitting host
# (localrule), where a submission would cost more than the job.


rule freeze_lineage:
    input:
        metas=get_lineage_artifact_metas,
    output:
        manifest=f"{RESULTS}/freeze/{{lineage}}/manifest.json",
    params:
        paths=lambda wc, input: [str(Path(m).parent) for m in input.metas],
        combine=False,
        results=RESULTS,
    localrule: True
    log:
        f"{RESULTS}/logs/freeze/{{lineage}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/freeze/{{lineage}}.tsv"
    script:
        "../../scripts/freeze.py"


rule freeze:
    input:
        manifests=get_lineage_manifests(),
    output:
        manifest=f"{RESULTS}/freeze/manifest.json",
    params:
        paths=lambda wc, input: list(input.manifests),
        combine=True,
        results=RESULTS,
    localrule: True
    log:
        f"{RESULTS}/logs/freeze.log",
    benchmark:
        f"{RESULTS}/benchmarks/freeze.tsv"
    script:
        "../../scripts/freeze.py"


# Global scope: one unseal event for the global root; each lineage then opens against it. The unseal
# log (freeze/unseal_log.jsonl) is deliberately not an output, so that Snakemake never deletes it.
rule unseal:
    input:
        manifest=rules.freeze.output.manifest,
    output:
        event=f"{RESULTS}/freeze/unseal.json",
    params:
        results=RESULTS,
    localrule: True
    log:
        f"{RESULTS}/logs/unseal.log",
    benchmark:
        f"{RESULTS}/benchmarks/unseal.tsv"
    script:
        "../../scripts/unseal.py"


rule unseal_lineage:
    input:
        manifest=rules.freeze_lineage.output.manifest,
        # Global scope: wait for the global event but never rerun because it was rewritten (ancient);
        # a change of this lineage's artifacts still reaches here through its own manifest.
        gate=get_unseal_gate(),
    output:
        event=f"{RESULTS}/freeze/{{lineage}}/unseal.json",
    params:
        scope=CFG.seal.seal_scope,
        results=RESULTS,
    localrule: True
    log:
        f"{RESULTS}/logs/unseal/{{lineage}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/unseal/{{lineage}}.tsv"
    script:
        "../../scripts/unseal.py"
