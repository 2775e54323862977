"""Stage script (rule apex_defense_table): APEX-Harm's defence table, each defence against the main run
(``evoaudit.report.apex.defense.build_defense_table``)."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.report.apex.defense import build_defense_table

with job_log(snakemake.log[0]):
    build_defense_table(
        from_dict(snakemake.config, "config (config/config.yaml and --config overrides)"),
        base=list(snakemake.input.base),
        base_judged=list(snakemake.input.base_judged),
        defended=list(snakemake.input.defended),
        judged=list(snakemake.input.judged),
        replays=list(snakemake.input.replays),
        out_csv=Path(snakemake.output.csv),
    )
