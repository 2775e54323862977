# evoaudit: execution-grounded audit of self-evolving LLM agents.
# The logic lives in the evoaudit package; each rule runs a thin stage script in scripts/ (Snakemake's
# `script:` directive) that calls one package function. The `evoaudit` CLI calls the same functions.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"

# AgentDojo's calendar tool orders a new event's participants by iterating a set of strings, so that
# order (a tool result, the terminal state and, through them, an official predicate) follows Python's
# per-process string hashing. Every job runs with one hash seed, so that evaluation, its determinism check
# and replay, each its own process, see the same order.
import os as _os

_os.environ["PYTHONHASHSEED"] = "0"

# Maps SLURM end states that the SLURM executor plugin would wait on forever (CANCELLED by <uid>,
# PREEMPTED) to failures; does nothing under any other executor. See evoaudit/ops/slurm_states.py.
from evoaudit.ops import slurm_states as _slurm_states

if workflow.is_main_process:
    _slurm_states.install(workflow)


include: "workflow/rules/common.smk"
include: "workflow/rules/suite.smk"
include: "workflow/rules/acquire.smk"
include: "workflow/rules/evolve.smk"
include: "workflow/rules/seal.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/rounds.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/poisoning.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/apex.smk"
include: "workflow/rules/suites.smk"
include: "workflow/rules/index.smk"


rule all:
    input:
        get_final_outputs(),
        get_apex_outputs(),
        get_export_outputs(),
        rules.run_index.output,
    default_target: True


# Where to read the results (not after a dry run): the Banking report, report.md and, when enabled, the
# APEX-Harm report and its ablation tables, whichever this run's targets have written.
onsuccess:
    from evoaudit.ops import progress as _progress

    print(
        _progress.success_message(
            RESULTS, CFG.apex.enabled, tuple(a.name for a in CFG.apex.ablations)
        ),
        file=sys.stderr,
    )
