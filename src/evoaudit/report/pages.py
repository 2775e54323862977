"""The report's HTML pages, Banking's and APEX-Harm's alike: one style, one page layout, and the readable
view of a table (intervals folded into one column, counts as counts)."""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd


def _fmt(v: Any) -> str:
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def collapse(frame: pd.DataFrame) -> pd.DataFrame:
    """Readable view: each (x, x_lo, x_hi) triple becomes one "x [lo, hi]" column; counts are integers."""
    out = {}
    cols = list(frame.columns)
    for c in cols:
        if c.endswith(("_lo", "_hi")) and c[:-3] in cols:
            continue
        if f"{c}_lo" in cols and f"{c}_hi" in cols:
            out[c] = [
                _fmt(v) + (f" [{_fmt(lo)}, {_fmt(hi)}]" if _fmt(lo) else "") if _fmt(v) else ""
                for v, lo, hi in zip(frame[c], frame[f"{c}_lo"], frame[f"{c}_hi"], strict=True)
            ]
        elif c.startswith("p_"):  # p-values: small ones must not print as 0.000
            out[c] = ["" if pd.isna(v) else f"{v:.2g}" for v in frame[c]]
        elif c == "n" or c.startswith("n_"):  # counts (float only where a gap made them so): 30, not 30.000
            out[c] = ["" if pd.isna(v) else str(int(v)) for v in frame[c]]
        else:
            out[c] = [_fmt(v) for v in frame[c]]
    return pd.DataFrame(out, columns=list(out))


_CSS = (
    "body{font-family:sans-serif;font-size:13px;margin:12px}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}th{background:#f2f2f2}"
    "td:first-child{text-align:left}pre{white-space:pre-wrap;background:#f7f7f7;padding:6px}"
)


INDEX_PAGE = "index.html"


def html_page(
    title: str,
    intro: str,
    body: str,
    banner: str | list[str] | None = None,
    *,
    back: str | None = INDEX_PAGE,
) -> str:
    """One report page: the simulator notice first (on a simulator run; a list is one paragraph each), a
    link ``back`` to the index it belongs to (None on an index itself), the title, what the page shows,
    then ``body``."""
    nav = "" if back is None else f"<p><a href='{back}'>&larr; all report pages</a></p>"
    notices = [banner] if isinstance(banner, str) else list(banner or [])
    top = "".join(f"<p class='sim'><strong>{html.escape(n)}</strong></p>" for n in notices if n)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>{top}{nav}<h2>{html.escape(title)}</h2>"
        f"<p>{html.escape(intro)}</p>{body}</body></html>\n"
    )


def table_html(frame: pd.DataFrame) -> str:
    """A table's readable view as HTML (empty for a table without rows)."""
    return collapse(frame).to_html(index=False, escape=True, border=0) if len(frame) else ""


def link_list(links: list[tuple[str, str]]) -> str:
    items = "".join(f"<li><a href='{href}'>{html.escape(text)}</a></li>" for href, text in links)
    return f"<ul>{items}</ul>"
