"""Open a finished run's reports in headless Chromium and take the screenshots that show them.

    python benchmarks/report_screenshot.py results/report/report.html --results results

The `snakemake --report` HTML (the positional argument, optional): no script errors, and every figure
renders. A probe script is added to a copy of the report: it records every error (uncaught exceptions,
rejected promises, console.error, failed resources), then asks the report's own app to display each figure
in turn and records whether the <img> decoded (natural width > 0).

The run's own pages, from ``<results>/index.html`` down: every link of an index resolves; an index links
every page of its directory; a linked page that is not itself an index links back to an index (the one
that listed it, or its own suite's); a linked index is checked the same way. Each index is also loaded in
Chromium, which must report no error.

Screenshots (``--out``): the run's index, a Banking table page (``main``), an APEX-Harm table page
(``apex_category``, when the run has APEX-Harm) and the Snakemake report. Chromium runs headless with a
fresh profile and no network. The last line printed is one JSON object; the exit status is 0 only when
there were no errors, every figure rendered and every index check passed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# Runs first in <head>: collects errors from everything that loads after it.
_CATCH = """<script>
window.__evoaudit = {errors: [], figures: {}};
window.addEventListener('error', function (e) {
  var what = e.message || (e.target && (e.target.src || e.target.href)) || 'resource error';
  window.__evoaudit.errors.push(String(what));
}, true);
window.addEventListener('unhandledrejection', function (e) {
  window.__evoaudit.errors.push('unhandled rejection: ' + String(e.reason));
});
(function () {
  var original = console.error;
  console.error = function () {
    window.__evoaudit.errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
})();
</script>"""

# Runs after the app: shows each figure through the app's own view and checks that the image decoded.
_PROBE = """<script>
window.addEventListener('load', function () {
  var paths = Object.keys(results).filter(function (p) { return /\\.(png|svg)$/.test(p); }).sort();
  var i = 0;
  function report() {
    var out = document.createElement('pre');
    out.id = 'evoaudit-probe';
    out.textContent = JSON.stringify({errors: window.__evoaudit.errors, figures: window.__evoaudit.figures,
                                      n_results: Object.keys(results).length});
    document.body.appendChild(out);
  }
  function next() {
    if (i >= paths.length) { report(); return; }
    var p = paths[i++];
    app.setView({content: 'img', contentPath: results[p].data_uri, resultPath: p});
    setTimeout(function () {
      var imgs = Array.prototype.filter.call(document.images, function (im) {
        return im.src === results[p].data_uri;
      });
      var ok = imgs.length > 0 && imgs.every(function (im) { return im.complete && im.naturalWidth > 0; });
      window.__evoaudit.figures[p] = ok;
      next();
    }, 400);
  }
  setTimeout(next, 500);
});
</script>"""


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def instrument(html: str) -> str:
    if "<head>" not in html or "</body>" not in html:
        raise ValueError("the report has no <head> or </body>: is it a snakemake --report HTML file?")
    html = html.replace("<head>", "<head>" + _CATCH, 1)
    idx = html.rfind("</body>")
    return html[:idx] + _PROBE + html[idx:]


def run(chromium: str, page: Path, profile: Path, *extra: str, timeout: float = 120) -> str:
    cmd = [
        chromium,
        *FLAGS,
        f"--user-data-dir={profile}",
        "--virtual-time-budget=30000",
        *extra,
        page.resolve().as_uri(),  # a file URI needs an absolute path
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def check(report: Path, out: Path, chromium: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "snakemake_report.png"
    with tempfile.TemporaryDirectory(prefix="evoaudit-chromium-") as tmp:
        page = Path(tmp) / "report.instrumented.html"  # the report is self-contained: no relative links
        page.write_text(instrument(report.read_text(encoding="utf-8")), encoding="utf-8")
        dom = run(chromium, page, Path(tmp) / "profile-dom", "--dump-dom")
        run(chromium, page, Path(tmp) / "profile-shot", f"--screenshot={shot}", "--window-size=1400,1000")
    match = re.search(r'<pre id="evoaudit-probe">(.*?)</pre>', dom, re.S)
    if match is None:
        probe = {"errors": ["the probe never reported: the page did not finish loading"], "figures": {}}
    else:
        text = match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
        probe = json.loads(text.replace("&amp;", "&"))
    figures = probe["figures"]
    return {
        "report": str(report),
        "screenshot": str(shot),
        "screenshot_bytes": shot.stat().st_size if shot.exists() else 0,
        "errors": probe["errors"],
        "figures_total": len(figures),
        "figures_rendered": sum(bool(v) for v in figures.values()),
        "figures": figures,
        "ok": not probe["errors"] and bool(figures) and all(figures.values()),
    }


_HREF = re.compile(r"""href=['"]([^'"#]+)['"]""")


def _links_to_an_index(page: Path, index: Path) -> bool:
    """Whether ``page`` links back to ``index`` or to another index page that exists (an ablation page
    links to APEX-Harm's index, which its own target builds; the run's index lists it)."""
    hrefs = _HREF.findall(page.read_text(encoding="utf-8"))
    targets = [(page.parent / h).resolve() for h in hrefs]
    return any(t == index.resolve() or (t.name == index.name and t.exists()) for t in targets)


def _load_errors(page_path: Path, chromium: str) -> list[str]:
    """The errors Chromium reports while loading ``page_path`` (a copy beside it, so links resolve)."""
    page = page_path.parent / f".{page_path.stem}.instrumented.html"
    html = page_path.read_text(encoding="utf-8").replace("<head>", "<head>" + _CATCH, 1)
    idx = html.rfind("</body>")
    probe = (
        "<script>window.addEventListener('load', function () { var o = document.createElement('pre');"
        " o.id = 'evoaudit-probe'; o.textContent = JSON.stringify({errors: window.__evoaudit.errors});"
        " document.body.appendChild(o); });</script>"
    )
    page.write_text(html[:idx] + probe + html[idx:], encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory(prefix="evoaudit-chromium-") as tmp:
            dom = run(chromium, page, Path(tmp) / "profile-index", "--dump-dom")
    finally:
        page.unlink(missing_ok=True)
    match = re.search(r'<pre id="evoaudit-probe">(.*?)</pre>', dom, re.S)
    if match is None:
        return [f"{page_path.name} did not finish loading"]
    text = match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))["errors"]


def check_index(index: Path, out: Path, chromium: str | None, _seen: set[Path] | None = None) -> dict:
    """The index links every page of its directory, each link resolves, each linked page links back, and
    each linked index passes the same check (its result under ``indexes``)."""
    seen = set() if _seen is None else _seen
    seen.add(index.resolve())
    problems: list[str] = []
    if not index.exists():
        return {"index": str(index), "ok": False, "problems": [f"{index} does not exist"], "pages": 0}
    links = _HREF.findall(index.read_text(encoding="utf-8"))
    pages = sorted(p.name for p in index.parent.glob("*.html") if p != index and not p.name.startswith("."))
    problems += [f"index does not link {name}" for name in pages if name not in links]
    nested: list[dict] = []
    for link in links:
        target = (index.parent / link).resolve()
        if not target.exists():
            problems.append(f"index links {link}, which does not exist")
        elif target.suffix != ".html" or target in seen:
            continue
        elif target.name == index.name:  # another index: checked as one
            nested.append(check_index(target, out, chromium, seen))
        elif not _links_to_an_index(target, index):
            problems.append(f"{link} does not link back to an index")
    errors = _load_errors(index, chromium) if chromium is not None else []
    return {
        "index": str(index),
        "pages": len(pages),
        "links": len(links),
        "problems": problems,
        "errors": errors,
        "indexes": nested,
        "ok": not problems and not errors and all(n["ok"] for n in nested),
    }


def screenshot(chromium: str, page: Path, shot: Path, size: str = "1400,1000") -> dict:
    """A headless Chromium screenshot of ``page`` as ``shot``."""
    shot.parent.mkdir(parents=True, exist_ok=True)
    if not page.exists():
        return {"page": str(page), "screenshot": None, "problem": f"{page} does not exist"}
    with tempfile.TemporaryDirectory(prefix="evoaudit-chromium-") as tmp:
        run(chromium, page, Path(tmp) / "profile", f"--screenshot={shot}", f"--window-size={size}")
    return {"page": str(page), "screenshot": str(shot), "bytes": shot.stat().st_size if shot.exists() else 0}


#: The pages photographed besides the Snakemake report, relative to the results directory, and the
#: window each is photographed in (the main table is wide: its cells do not wrap).
PAGES = {
    "index": ("index.html", "1400,700"),
    "banking_main": ("report/html/main.html", "2600,900"),
    "apex_category": ("apex/report/html/apex_category.html", "1400,1000"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "report",
        type=Path,
        nargs="?",
        help="the HTML file written by snakemake --report (checked when given)",
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/output/report_screenshots"),
        help="where to put the screenshots",
    )
    args = p.parse_args(argv)
    args.results, args.out = args.results.resolve(), args.out.resolve()
    chromium = find_chromium()
    if chromium is None:
        print(json.dumps({"ok": False, "skipped": "no chromium on PATH (apt-get install -y chromium)"}))
        return 2
    result: dict = {"ok": True}
    if args.report is not None:
        result = check(args.report.resolve(), args.out, chromium)
    result["index_check"] = check_index(args.results / "index.html", args.out, chromium)
    shots = {}
    for name, (rel, size) in PAGES.items():
        if name == "apex_category" and not (args.results / "apex").exists():
            continue  # a run without APEX-Harm
        shots[name] = screenshot(chromium, args.results / rel, args.out / f"{name}.png", size)
    result["screenshots"] = shots
    missing = [s["problem"] for s in shots.values() if s.get("problem")]
    result["ok"] = result["ok"] and result["index_check"]["ok"] and not missing
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
