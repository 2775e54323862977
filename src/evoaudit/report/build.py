"""Build the report: tables (CSV and parquet), figures, per-table HTML pages and report.md.

Every output name is fixed in advance (``TABLES``, ``figures.FIGURES``), so the workflow can declare them;
a table whose inputs do not exist in this run is still written, empty but with its header, and report.md
says "not available in this run".
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.jsonl import iter_records
from evoaudit.methods.conditions import condition
from evoaudit.methods.placebo import deployed_chars
from evoaudit.provenance import write_provenance
from evoaudit.records import ArtifactMeta, CheckerAuditSummary, Rollout, SuiteSpec
from evoaudit.replay.defended import shard_defense
from evoaudit.replay.stage import audit_checks
from evoaudit.report import exclusions, trace
from evoaudit.report import figures as figs
from evoaudit.report import qualitative as qual
from evoaudit.report import tables as t
from evoaudit.report import transfer as tr
from evoaudit.report.files import write_table
from evoaudit.report.names import DEFENSE_TABLE, EXTENSION_TABLES, ROLLOUT_TABLE, ROUNDS_TABLE, TABLES
from evoaudit.report.pages import (
    INDEX_PAGE,
    collapse,
    html_page,
    link_list,
    table_html,
)
from evoaudit.report.retrieval import retrieved_provenance
from evoaudit.report.rollout_table import write_rollout_table
from evoaudit.report.simlabel import records_sim_notice, sim_notice
from evoaudit.report.stats import INTERVAL_NOTE, TESTS_NOTE
from evoaudit.seal.coverage import later_round
from evoaudit.seal.manifest import artifact_sha256
from evoaudit.suite.registry import get_suite
from evoaudit.transfer_config import active_conditions


def load_rollouts(paths: list[Path]) -> list[Rollout]:
    rollouts = [r for p in paths for r in iter_records(p, Rollout)]
    return sorted(rollouts, key=lambda r: r.rollout_id)


def main_table(cfg: Config, rollouts: list[Rollout]) -> pd.DataFrame:
    return t.main_table(t.Data.build(cfg, rollouts))


TRACES_PAGE = "qualitative_traces"


def markdown_table(frame: pd.DataFrame) -> str:
    view = collapse(frame)
    cols = list(view.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in view.iterrows():
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _write_table(
    frame: pd.DataFrame, name: str, out_dir: Path, note: str, footer: str = "", banner: str | None = None
) -> None:
    tables, pages = out_dir / "tables", out_dir / "html"
    write_table(frame, tables / f"{name}.csv", banner, float_format="%.6f")
    title, what = TABLES[name] if name in TABLES else EXTENSION_TABLES[name]
    body = table_html(frame)
    body += f"<p><em>{html.escape(note)}</em></p>" if note else ""
    body += f"<p><small>{html.escape(footer)}</small></p>" if footer else ""
    (pages / f"{name}.html").write_text(html_page(title, what, body, banner))


def _write_index(
    out_dir: Path, figures: list[str], banner: str | None, extensions: tuple[str, ...] = ()
) -> None:
    """html/index.html: a link to every table page (and each extension's that ran), the traces page and
    every figure."""
    items = [(f"{n}.html", TABLES[n][0]) for n in TABLES] + [(f"{TRACES_PAGE}.html", "Qualitative traces")]
    items += [(f"{n}.html", EXTENSION_TABLES[n][0]) for n in extensions]
    body = f"<h3>Tables</h3>{link_list(items)}"
    body += f"<h3>Figures</h3>{link_list([(f'../figures/{f}.png', f) for f in figures])}" if figures else ""
    body += "<p>The same content as text: <a href='../report.md'>report.md</a>.</p>"
    intro = "Every page of the report; each page links back here."
    (out_dir / "html" / INDEX_PAGE).write_text(html_page("evoaudit report", intro, body, banner, back=None))


def uncorrected_families(spec: dict | None, audit: dict | None) -> list[str] | None:
    """Families whose official checker needed no correction: the spec's list, else the audit's 'passing'."""
    for source in (spec or {}, audit or {}):
        for key in ("official_unchanged", "passing"):
            if isinstance(source.get(key), list):
                return sorted(source[key])
    return None


def read_metas(paths: list[Path]) -> dict[tuple[str, str], dict]:
    """{(lineage, method): meta} from paths shaped .../artifacts/<lineage>/<method>/meta.json."""
    out = {}
    for p in paths:
        if p.exists():
            out[(p.parent.parent.name, p.parent.name)] = ArtifactMeta.read(p).model_dump(mode="json")
    return out


_NA = "Not available in this run"


def build_report(
    cfg: Config,
    rollout_paths: list[Path],
    replay_paths: list[Path],
    provenance: dict,
    out_dir: Path,
    *,
    audit_summary: Path | None = None,
    spec: Path | None = None,
    meta_paths: list[Path] | None = None,
    transfer_paths: list[Path] | None = None,
    defense_paths: list[Path] | None = None,
    round_paths: list[Path] | None = None,
    round_meta_paths: list[Path] | None = None,
) -> dict[str, pd.DataFrame]:
    """``defense_paths``: the defended shards (config key defenses); with defences configured the report
    gains the defence table, a named extension beside the paper's tables. ``round_paths`` and
    ``round_meta_paths``: the later rounds' shards and artifacts (methods_params.rounds); with more than
    one round the report gains the rounds table and figure, another named extension."""
    for sub in ("tables", "html", "figures"):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
    rollouts = load_rollouts(rollout_paths)
    data = t.Data.build(cfg, rollouts)
    notes: dict[str, str] = {}
    tables, cases = _paper_tables(
        cfg, data, rollouts, notes, audit_summary, spec, meta_paths or [], transfer_paths
    )

    uncertainty = INTERVAL_NOTE.format(
        level=data.boot.level,
        replicates=data.boot.replicates,
        seed=data.boot.seed,
        tasks=get_suite(cfg.suite.name).task_noun,
    )
    banner = sim_notice(cfg)
    for name, frame in tables.items():
        footer = uncertainty + (" " + TESTS_NOTE if name in ("main", "sensitivity") else "")
        _write_table(frame, name, out_dir, notes.get(name, ""), footer, banner)
    extensions: dict[str, pd.DataFrame] = {}
    if cfg.defenses:
        frame = extensions[DEFENSE_TABLE] = _defense_table(cfg, data, defense_paths or [], notes)
        _write_table(frame, DEFENSE_TABLE, out_dir, notes[DEFENSE_TABLE], uncertainty, banner)
    if cfg.methods_params.rounds > 1:
        metas = [*(meta_paths or []), *(round_meta_paths or [])]
        frame = extensions[ROUNDS_TABLE] = _rounds_table(
            cfg, data, round_paths or [], metas, out_dir.parent, notes
        )
        _write_table(frame, ROUNDS_TABLE, out_dir, notes[ROUNDS_TABLE], uncertainty, banner)
    # One row per evaluation rollout (the primary executor's), the notice in the parquet metadata.
    notice = records_sim_notice([r.executor for r in rollouts], banner)
    write_rollout_table(rollouts, out_dir / "tables" / f"{ROLLOUT_TABLE}.parquet", cfg.suite.name, notice)

    traces_md = _write_traces(cfg, cases, out_dir, banner)
    _write_index(out_dir, list(figs.FIGURES) if cfg.report.figures else [], banner, tuple(extensions))

    if cfg.report.figures:
        figs.draw_all(tables, list(cfg.lineages), cfg.report.baseline, out_dir / "figures", banner)
        if ROUNDS_TABLE in extensions:
            figs.draw_rounds(extensions[ROUNDS_TABLE], out_dir / "figures", banner)

    # The caller may have split off the determinism check already (it then travels in the provenance).
    checks = provenance.get("checks") or audit_checks(replay_paths)[1]
    _write_markdown(cfg, data, {**tables, **extensions}, notes, traces_md, checks, provenance, out_dir)
    write_provenance([out_dir / "report.md", out_dir / "tables" / "main.csv"], cfg, "report", provenance)
    return tables


def _paper_tables(
    cfg: Config,
    data: t.Data,
    rollouts: list[Rollout],
    notes: dict[str, str],
    audit_summary: Path | None,
    spec: Path | None,
    meta_paths: list[Path],
    transfer_paths: list[Path] | None,
) -> tuple[dict[str, pd.DataFrame], list]:
    """The paper's tables, in their order, and the qualitative cases; what a table lacks goes to ``notes``."""
    base = data.baseline
    tables: dict[str, pd.DataFrame] = {}
    tables["main"] = t.main_table(data)
    if base is None:
        notes["main"] = f"{_NA}: Δs and transitions (baseline {cfg.report.baseline!r} was not evaluated)."
    tables["per_goal"] = t.per_goal_table(data)
    tables["lineage"] = t.lineage_table(data)
    if tables["lineage"].empty:
        notes["lineage"] = f"{_NA}: needs the baseline and at least one other condition."
    tables["harm"] = t.harm_table(data)
    tables["interface"] = t.interface_table(data)
    tables["sensitivity"] = _sensitivity_table(cfg, rollouts, notes, audit_summary, spec)

    metas = read_metas(meta_paths)
    tables["placebo"] = t.placebo_table(data, t.find_length_ratios(metas))
    if tables["placebo"].empty:
        notes["placebo"] = f"{_NA}: no placebo condition together with its method."
    artifact_dirs = {(p.parent.parent.name, p.parent.name): p.parent for p in meta_paths}
    tables["retrieval"] = t.retrieval_table(data, retrieved_provenance(rollouts, artifact_dirs))
    if tables["retrieval"].empty:
        notes["retrieval"] = f"{_NA}: no ReasoningBank rollouts whose retrieval could be traced."
    tables["transfer"] = _transfer_table(cfg, rollouts, notes, transfer_paths)

    cases = qual.select(cfg.qualitative, data.conditions, base, data.by) if base is not None else []
    tables["qualitative"] = qual.cases_table(cases)
    q = cfg.qualitative
    rule = (
        f"Rule (config qualitative): high severity = {', '.join(q.high_severity)}; largest by {q.unit}; "
        f"baseline {cfg.report.baseline}."
    )
    missing_cases = [c for c in qual.CASES if c not in {x.case for x in cases}]
    notes["qualitative"] = rule + (
        f" {_NA}: no qualifying episode for {', '.join(missing_cases)} "
        "(no condition other than the baseline produced one)."
        if missing_cases
        else ""
    )
    tables["diagnostics"] = t.diagnostics_table(metas)
    if tables["diagnostics"].empty:
        notes["diagnostics"] = f"{_NA}: no artifact diagnostics were given."
    # Lost denominators and the basis of exposure go into the captions (report.exclusions).
    for name, extra in exclusions.caption_notes(data, rollouts).items():
        notes[name] = f"{notes.get(name, '')} {extra}".strip()
    return tables, cases


def _sensitivity_table(
    cfg: Config, rollouts: list[Rollout], notes: dict[str, str], audit_summary: Path | None, spec: Path | None
) -> pd.DataFrame:
    """The main table's levels on subsets of families: uncorrected by the checker audit, seen, unseen."""
    spec_doc = SuiteSpec.read(spec).model_dump() if spec is not None and spec.exists() else None
    audit_doc = (
        CheckerAuditSummary.read(audit_summary).model_dump(mode="json")
        if audit_summary is not None and audit_summary.exists()
        else None
    )
    unc = uncorrected_families(spec_doc, audit_doc)
    splits = {"seen": sorted({r.family for r in rollouts if r.split == "seen"})}
    splits["unseen"] = sorted({r.family for r in rollouts if r.split == "unseen"})
    subsets: dict[str, list[str] | None] = {"uncorrected": unc if unc is not None else []}
    subsets.update(splits)
    frame = t.sensitivity_table(cfg, rollouts, subsets)
    missing = [k for k, v in subsets.items() if not v]
    if missing:
        notes["sensitivity"] = f"{_NA}: subsets {', '.join(missing)} (no families)."
    return frame


def _transfer_table(
    cfg: Config, rollouts: list[Rollout], notes: dict[str, str], transfer_paths: list[Path] | None
) -> pd.DataFrame:
    """The cross-executor check against the second executor's shards."""
    second = load_rollouts(transfer_paths or [])
    frame = tr.transfer_table(cfg, rollouts, second, t.bootstrap_seed(cfg))
    if not cfg.transfer.enabled:
        notes["transfer"] = f"{_NA}: transfer.enabled is false."
    elif not second:
        notes["transfer"] = (
            f"{_NA}: none of transfer.conditions {list(cfg.transfer.conditions)} was evaluated on the second "
            "executor."
        )
    absent = [c for c in cfg.transfer.conditions if c not in active_conditions(cfg)]
    if absent and cfg.transfer.enabled:
        notes["transfer"] = (notes.get("transfer", "") + f" Conditions {absent} are not in this run.").strip()
    return frame


def _write_traces(cfg: Config, cases: list, out_dir: Path, banner: str | None) -> list[str]:
    """The qualitative cases' traces: their HTML page written, their markdown returned for report.md."""
    traces_md, traces_html = [], []
    for c in cases:
        head = (
            f"{c.case}: condition {c.condition}, {c.unit} {c.unit_value} "
            f"({c.group_size} such episodes); baseline twin {c.baseline.rollout_id}"
        )
        traces_md += [
            f"### {head}",
            "",
            trace.render(c.rollout, cfg.qualitative.max_chars, markdown=True, suite=cfg.suite.name),
            "",
        ]
        mine = html.escape(trace.render(c.rollout, cfg.qualitative.max_chars, suite=cfg.suite.name))
        twin = html.escape(trace.render(c.baseline, cfg.qualitative.max_chars, suite=cfg.suite.name))
        traces_html.append(
            f"<h3>{html.escape(head)}</h3><pre>{mine}</pre>"
            f"<details><summary>baseline twin</summary><pre>{twin}</pre></details>"
        )
    (out_dir / "html" / f"{TRACES_PAGE}.html").write_text(
        html_page(
            "Qualitative cases",
            TABLES["qualitative"][1],
            "".join(traces_html) or f"<p>{_NA}: no qualifying case.</p>",
            banner,
        )
    )
    return traces_md


def defended_by_path(paths: list[Path], defenses) -> dict[str, list[Rollout]]:
    """The defended rollouts of each of ``defenses``, grouped by the defence each shard's path names
    (``results/defense/<d>/...``, ``replay.defended.shard_defense``), never by a record's own claim: a
    shard outside a configured defence's directory, or a record whose ``defense`` field disagrees with its
    shard's, is an AuditError naming the file."""
    out: dict[str, list[Rollout]] = {d: [] for d in defenses}
    for p in paths:
        d = shard_defense(p)
        if d not in out:
            raise AuditError(
                f"{p}: not under a configured defence's directory (results/defense/<d>/, {defenses})"
            )
        for r in iter_records(p, Rollout):
            if r.defense != d:
                raise AuditError(
                    f"{p}: rollout {r.rollout_id} says defense {r.defense!r} but its shard is {d!r}'s"
                )
            out[d].append(r)
    return {d: sorted(rs, key=lambda r: r.rollout_id) for d, rs in out.items()}


def _defense_table(cfg: Config, data: t.Data, paths: list[Path], notes: dict[str, str]) -> pd.DataFrame:
    """The defence table (report.tables.defense_table) from the defended shards, and its caption."""
    by_defense = defended_by_path(paths, cfg.defenses)
    frame = t.defense_table(data, {d: t.Data.build(cfg, rs) for d, rs in by_defense.items()})
    absent = [d for d, rs in by_defense.items() if not rs]
    note = (
        "A named extension (config key defenses), not part of the paper's protocol. Each defence reran every "
        "condition and arm with the undefended run's seeds; spotlighting_with_delimiting, repeat_user_prompt "
        "and tool_filter are AgentDojo's own, data_marking evoaudit's."
    )
    if sim_notice(cfg):
        note += (
            " On the simulator this is a mechanism check (does what a defence writes reach the model, and "
            "does the pipeline carry its effect to the table?): the simulator reacts to a defence's system "
            "text only through its cues (sim.cues), and answers the tool filter's question from its granted "
            "plan (oracle knowledge of the task's tools, so tool_filter holds by construction); no number "
            "here measures a defence against a model."
        )
    if absent:
        note += f" Not available in this run: no rollouts for {absent}."
    notes[DEFENSE_TABLE] = note
    return frame


def round_of(path: Path, results_dir: Path) -> int:
    """The evolution round a shard or an artifact of ``results_dir`` belongs to: ``rounds/<r>/...``,
    else round 1 (the protocol's own layout)."""
    return later_round(Path(path).resolve().relative_to(Path(results_dir).resolve())) or 1


def round_artifacts(meta_paths: list[Path], results_dir: Path) -> dict[tuple[int, str, str], Path]:
    """{(round, lineage, method): artifact directory} of ``[rounds/<r>/]artifacts/<l>/<m>/meta.json``."""
    return {(round_of(p, results_dir), p.parent.parent.name, p.parent.name): p.parent for p in meta_paths}


def _rounds_table(
    cfg: Config,
    data: t.Data,
    paths: list[Path],
    meta_paths: list[Path],
    results_dir: Path,
    notes: dict[str, str],
) -> pd.DataFrame:
    """The rounds table (report.tables.rounds_table): round 1 from the protocol's own shards, each later
    round from its shards under rounds/<r>/, and its caption. A later round's rollout must have deployed
    that round's artifact (its ``artifact_sha256``): the round is read off the path, the record proves it."""
    artifacts = round_artifacts(meta_paths, results_dir)
    hashes = {key: artifact_sha256(d) for key, d in artifacts.items()}
    by_round: dict[int, list[Rollout]] = {}
    for p in paths:
        r = round_of(p, results_dir)
        if r == 1:
            raise AuditError(
                f"rounds table: {p} is not a later round's shard (results/rounds/<r>/evaluate/...)"
            )
        for rollout in load_rollouts([p]):
            key = (r, rollout.lineage, condition(rollout.condition).method)
            if rollout.artifact_sha256 != hashes.get(key):
                raise AuditError(
                    f"rounds table: {p}: rollout {rollout.rollout_id} deployed artifact "
                    f"{(rollout.artifact_sha256 or 'none')[:12]}, not round {r}'s "
                    f"{(hashes.get(key) or 'missing')[:12]} ({artifacts.get(key)}); rerun its evaluation"
                )
            by_round.setdefault(r, []).append(rollout)
    evolved = {c for rs in by_round.values() for c in {r.condition for r in rs}}
    first = t.Data.build(
        cfg,
        [r for c in data.conditions if c in evolved for a in ("benign", "attacked") for r in data.get(c, a)],
    )
    frames = {1: first, **{r: t.Data.build(cfg, rs) for r, rs in sorted(by_round.items())}}
    frame = t.rounds_table(frames, {key: deployed_chars(d) for key, d in artifacts.items()})
    note = (
        f"A named extension (methods_params.rounds: {cfg.methods_params.rounds}), not part of the paper's "
        "protocol, which evolves in one offline pass. Each later round acquired on the learning variants "
        "with the previous round's artifact deployed and evolved from it; every round's artifact was frozen "
        "before any endpoint variant was read, and each was then evaluated with round 1's seeds."
    )
    if sim_notice(cfg):
        note += (
            " On the simulator this is a mechanism check of the loop (does each round deploy, evolve, freeze "
            "and evaluate its predecessor's state?): the simulator's method effects are its cues, not a "
            "model's response to an evolved artifact, so no drift here is a finding about a model."
        )
    missing = sorted(set(range(2, cfg.methods_params.rounds + 1)) - set(by_round))
    if missing:
        note += f" Not available in this run: no rollouts for rounds {missing}."
    notes[ROUNDS_TABLE] = note
    return frame


def _write_markdown(cfg, data, tables, notes, traces_md, checks, provenance, out_dir) -> None:
    policy = (
        "excluded from every denominator and counted in n_excluded"
        if cfg.evaluation.infra_failure_policy == "exclude"
        else "kept in the denominators as failures"
    )
    boot = data.boot
    notice = sim_notice(cfg)
    md = [
        "# evoaudit report",
        "",
        *([f"**{notice}**", ""] if notice else []),
        f"Lineages: {', '.join(cfg.lineages)}. Conditions: {', '.join(data.conditions) or 'none'}. "
        f"Executor: {cfg.executor.backend} ({cfg.executor.model}). Baseline for Δs: {cfg.report.baseline}. "
        f"Families: {len(boot.families)}.",
        "",
        "utility = P(task done | benign endpoint episode); exposure = P(injected text reached the model); "
        "casr = P(goal achieved | exposed); asr = P(goal achieved); unauth = P(unauthorised state change), "
        f"over attacked episodes. Infrastructure failures are {policy}.",
        "",
        "## Uncertainty",
        "",
        INTERVAL_NOTE.format(
            level=boot.level,
            replicates=boot.replicates,
            seed=boot.seed,
            tasks=get_suite(cfg.suite.name).task_noun,
        ),
        "",
        TESTS_NOTE,
        "",
    ]
    main = tables["main"]
    if len(main):
        unexposed = int(main["unexposed_successes"].sum())
        md += [
            "Factorisation check: "
            + (
                "no unexposed episode succeeded, so ASR = exposure × conditional ASR exactly."
                if unexposed == 0
                else f"{unexposed} unexposed episodes succeeded; ASR does not factor into exposure × cASR."
            ),
            "",
        ]
    for name, frame in tables.items():
        title, what = TABLES[name] if name in TABLES else EXTENSION_TABLES[name]
        md += [f"## {title}", "", what, ""]
        if name in notes:
            md += [notes[name], ""]
        if len(frame):
            md += [markdown_table(frame), ""]
        if name == "qualitative" and traces_md:
            md += traces_md
    if cfg.report.figures:
        md += ["## Figures", ""]
        md += [f"![{f}](figures/{f}.png)" for f in figs.FIGURES] + [""]
    md += _checks_markdown(checks, provenance)
    (out_dir / "report.md").write_text("\n".join(md))


def _checks_markdown(checks: dict, provenance: dict) -> list[str]:
    """report.md's closing sections: the replay and determinism checks, and the provenance."""
    return [
        "## Replay",
        "",
        f"Rollouts replayed independently: {checks['replay']['rollouts_replayed']}; rollouts with a "
        f"mismatch: {checks['replay']['mismatched_rollouts']}"
        + (
            f" (by field: {checks['replay']['mismatches_by_field']})."
            if checks["replay"]["mismatched_rollouts"]
            else "."
        ),
        "",
        (
            "Determinism check: {sampled} rollouts re-run, {verified} identical, "
            "{differing} differing.".format(**checks["verify"])
            if checks.get("verify")
            else "Determinism check: not available in this run."
        ),
        "",
        "## Provenance",
        "",
        "```json",
        json.dumps(provenance, indent=2, sort_keys=True),
        "```",
        "",
    ]
