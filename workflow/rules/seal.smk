rule freeze:
    input:
        metas=get_all_artifact_metas(),
    output:
        manifest=f"{RESULTS}/freeze/manifest.json",
    params:
        dirs=lambda wc, input: [str(Path(m).parent) for m in input.metas],
    log:
        f"{RESULTS}/logs/freeze.log",
    benchmark:
        f"{RESULTS}/benchmarks/freeze.tsv"
    shell:
        "evoaudit -v freeze --config {RESOLVED_CONFIG} --results {RESULTS} --manifest {output.manifest}"
        " {params.dirs} > {log} 2>&1"


rule unseal:
    input:
        manifest=rules.freeze.output.manifest,
    output:
        event=f"{RESULTS}/freeze/unseal.json",
    log:
        f"{RESULTS}/logs/unseal.log",
    benchmark:
        f"{RESULTS}/benchmarks/unseal.tsv"
    shell:
        "evoaudit -v unseal --config {RESOLVED_CONFIG} --results {RESULTS} --manifest {input.manifest}"
        " --event {output.event} > {log} 2>&1"
