# Cross-executor transfer check: the frozen artifacts, without re-evolution, evaluated on a second
# executor (config `transfer`) over a subset of the attacked endpoint. The ordinary evaluate command runs
# under a derived configuration (second executor, goal and variant subset); nothing is evolved again.
from evoaudit.hashing import sha256_json
from evoaudit.transfer_config import derive_config as _derive_transfer_config

# Derived at parse time as well, so a bad `transfer` section stops the run before any job starts.
# Hashed with URL credentials redacted (public_config, common.smk), as every rerun trigger is.
_TRANSFER_DIGEST = (
    sha256_json(public_config(_derive_transfer_config(CFG)))[:16]
    if CFG.transfer.enabled and get_transfer_shards()
    else ""
)


rule transfer_config:
    output:
        config=LAYOUT.transfer("config.json"),
    params:
        derived=_TRANSFER_DIGEST,
    log:
        LAYOUT.log("transfer/config"),
    benchmark:
        LAYOUT.benchmark("transfer/config")
    script:
        "../../scripts/transfer_config.py"


rule transfer_evaluate:
    input:
        config=rules.transfer_config.output.config,
        table=rules.instances.output.table,
        spec=rules.instances.output.spec,
        endpoint=rules.instances.output.endpoint,
        manifest=rules.freeze_lineage.output.manifest,
        event=rules.unseal_lineage.output.event,
        meta=get_artifact_meta,
    output:
        rollouts=LAYOUT.transfer_shard("{lineage}", "{condition}"),
    params:
        cfg=get_stage_params("evaluate"),
        derived=_TRANSFER_DIGEST,
        arm="attacked",
        shard=0,
        results=RESULTS,
    resources:
        api_slots=evoaudit_resources.api_slots(CFG, "transfer_evaluate"),
    localrule: evoaudit_resources.local_endpoint_rules(CFG)
    log:
        LAYOUT.log("transfer/{lineage}/{condition}"),
    benchmark:
        LAYOUT.benchmark("transfer/{lineage}/{condition}")
    script:
        "../../scripts/evaluate.py"
