"""Stage script (rule run_index): the page linking every report of the run."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.joblog import job_log
from evoaudit.report.run_index import write_run_index

with job_log(snakemake.log[0]):
    write_run_index(
        Path(snakemake.output[0]),
        snakemake.params.results,
        snakemake.params.apex,
        tuple(snakemake.params.ablations),
        list(snakemake.params.notices),
        bool(snakemake.params.defenses),
    )
