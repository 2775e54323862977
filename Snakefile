# evoaudit: execution-grounded audit of self-evolving LLM agents.
# The logic lives in the evoaudit package; rules only wire files to `evoaudit` subcommands.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/suite.smk"
include: "workflow/rules/acquire.smk"
include: "workflow/rules/evolve.smk"
include: "workflow/rules/seal.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_final_outputs(),
    default_target: True
