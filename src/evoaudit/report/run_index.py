"""The run's index: one page at the top of a results directory that links every report the configuration
builds (the audit report, and with APEX-Harm enabled its report and each ablation's table), with the
simulator notices of both.

The paths of the reports under a results directory are named here once, for the workflow, the page and
the message a finished run prints. Kept free of heavy imports: the workflow reads it while parsing.
"""

from __future__ import annotations

import html
import shlex
from pathlib import Path

from evoaudit.paths import RELATIVE

#: The index page, at the top of the results directory.
RUN_INDEX = "index.html"
#: The audit report's own index and report.md, relative to the results directory.
AUDIT_INDEX = RELATIVE.report("html", "index.html")
AUDIT_MARKDOWN = RELATIVE.report("report.md")
#: APEX-Harm's report index and the page of ablation ``{name}``, relative to the results directory.
APEX_INDEX = RELATIVE.apex_report("html", "index.html")
APEX_ABLATION_PAGE = RELATIVE.apex_report("ablations", "{name}.html")
#: The back link of an ablation page (``APEX_ABLATION_PAGE``): the APEX-Harm report's index, which the
#: ablation's own target (``snakemake apex``) builds too; the run's index lists the ablation pages.
INDEX_FROM_ABLATION = "../html/index.html"
#: APEX-Harm's defence table (the defence axis, config key ``defenses``), beside the ablation pages' folder
#: so that the same back link applies.
APEX_DEFENSE_PAGE = RELATIVE.apex_report("defenses", "defense.html")


def report_paths(
    apex: bool, ablations: tuple[str, ...] = (), defenses: bool = False
) -> list[tuple[str, str]]:
    """(path relative to the results directory, what it is) of every report a configuration builds."""
    out = [(AUDIT_INDEX, "Audit report (HTML)"), (AUDIT_MARKDOWN, "Audit report as text (report.md)")]
    if apex:
        out.append((APEX_INDEX, "APEX-Harm report (HTML)"))
        out += [(APEX_ABLATION_PAGE.format(name=n), f"APEX-Harm ablation {n}") for n in ablations]
        if defenses:
            out.append((APEX_DEFENSE_PAGE, "APEX-Harm defences (named extension)"))
    return out


def run_notices(cfg) -> list[str]:
    """The simulator notices of the run's reports (the audit's, then APEX-Harm's when enabled)."""
    from evoaudit.report.simlabel import apex_sim_notice, sim_notice

    notices = [sim_notice(cfg), apex_sim_notice(cfg) if cfg.apex.enabled else None]
    return [n for n in notices if n]


def write_run_index(
    out: Path,
    results: str,
    apex: bool,
    ablations: tuple[str, ...],
    notices: list[str],
    defenses: bool = False,
) -> None:
    """Write ``out`` (``<results>/index.html``): every report of the run, each simulator notice on top."""
    from evoaudit.report.pages import html_page, link_list

    body = "<h3>Reports</h3>" + link_list(report_paths(apex, ablations, defenses))
    snakemake_report = html.escape(f"snakemake --report {shlex.quote(f'{results}/report/report.html')}")
    body += (
        "<p>Snakemake's own report of the run (every table page and figure with its caption, and the job "
        f"graph) is written on request: <code>{snakemake_report}</code>.</p>"
    )
    intro = f"The reports of the results directory {results}/; each page links back to its own index."
    out.write_text(html_page("evoaudit run", intro, body, notices, back=None))
