"""Names of every report output, fixed in advance so that the workflow can declare them.

Kept free of heavy imports: the workflow reads it while parsing.
"""

from __future__ import annotations

# One row per evaluation rollout (report.rollout_table), written beside the tables as parquet only.
ROLLOUT_TABLE = "rollouts"

FIGURES = ("delta_utility_asr", "exposure_casr", "harm", "interface")

# name -> (title, what it shows); the captions of the Snakemake report say the same at more length.
TABLES: dict[str, tuple[str, str]] = {
    "main": (
        "Main table",
        "Per condition: benign utility and utility under attack (the user's task in attacked episodes, "
        "judged with the attacker's effects taken back); paired transitions against the baseline on "
        "identical (lineage, family, variant) with an exact McNemar test (pairs as units) and a family "
        "sign-flip test (families as units); exposure, conditional ASR = P(success | exposed), ASR and "
        "unauthorised state change over attacked episodes; Δ = condition − baseline on matched episodes; "
        "counts.",
    ),
    "per_goal": (
        "Per injection goal",
        "Exposure, conditional ASR and ASR per goal and condition, Δ vs baseline.",
    ),
    "lineage": (
        "Lineage robustness",
        "Per-lineage Δ vs baseline of each headline effect, median, range and the number of lineages that "
        "agree in sign with the pooled Δ.",
    ),
    "harm": (
        "Harm",
        "unauth = asr_state (goal achieved with a state change) + extra_state (state change without goal "
        "success); partition_residual must be 0. Rate of each harm category and of disclosure.",
    ),
    "interface": (
        "Interface diagnostics",
        "Textual-action rate (a tool call written as text, not executed), zero-real-tool-call rate, mean "
        "real tool calls, and share of episodes with a read call, per condition and arm, over every episode "
        "(infrastructure failures included; n_excluded counts those the other tables leave out).",
    ),
    "sensitivity": (
        "Sensitivity",
        "The main table re-aggregated over families whose official predicate logic was kept (uncorrected: "
        "12 under the published checker-audit profile), seen families and unseen families, each with its "
        "own family bootstrap.",
    ),
    "placebo": (
        "Placebo contrasts",
        "Each method against its placebo on the episodes both ran, with the realised placebo/real length "
        "ratio from the placebo artifacts' diagnostics.",
    ),
    "retrieval": (
        "ReasoningBank retrieval provenance",
        "ReasoningBank episodes split by whether the memory they retrieved was success- or failure-derived.",
    ),
    "transfer": (
        "Cross-executor transfer",
        "Frozen artifacts on the primary and a second executor over the transfer subset, without "
        "re-evolution; flags mark ceiling or floor rates under the baseline.",
    ),
    "qualitative": (
        "Qualitative cases",
        "Cases picked by the configured rule: largest new high-severity failure, largest C→W regression and "
        "largest W→C gain against the baseline; traces are in qualitative.html and report.md.",
    ),
    "diagnostics": ("Evolution diagnostics", "Scalar diagnostics from each artifact's meta.json."),
}


# Tables of named extensions, written only when the extension runs (never part of the paper's report,
# whose outputs TABLES fixes): the defence axis (config key defenses).
DEFENSE_TABLE = "defense"
# Multi-round evolution (methods_params.rounds > 1): its table and its figure.
ROUNDS_TABLE = "rounds"
ROUNDS_FIGURE = "rounds"
EXTENSION_TABLES: dict[str, tuple[str, str]] = {
    DEFENSE_TABLE: (
        "Defences",
        "Per (defence, condition): benign utility, utility under attack, exposure, conditional ASR, ASR and "
        "unauthorised state change, as in the main table; defence 'none' is the undefended run. "
        "d_* = defended − undefended on the same condition's matched episodes (same lineage, family, "
        "variant, goal and seed); dd_* = that Δ minus the same defence's Δ on the baseline condition, "
        "i.e. whether a defence that holds for the static agent still holds for an evolved one. "
        "Denominators: n_benign benign episodes (utility), n_attacked attacked episodes (utility under "
        "attack, exposure, ASR, unauth), n_exposed exposed ones (conditional ASR).",
    ),
    ROUNDS_TABLE: (
        "Evolution rounds",
        "Per (round, condition, lineage): benign utility, exposure, ASR and unauthorised state change of the "
        "artifact each round of evolution left, evaluated on the endpoints after the last round's freeze; "
        "lineage 'all' pools the lineages, the other rows are the lineages as repetitions. d_* = that round "
        "− round 1 on the same episodes (same lineage, family, variant, goal and seed); artifact_chars = "
        "characters of the deployed artifact as placebos measure it (skill document, workflows, memory "
        "items' text; mean over lineages for 'all'). Denominators: n_benign "
        "benign episodes (utility), n_attacked attacked episodes (exposure, ASR, unauth).",
    ),
}
