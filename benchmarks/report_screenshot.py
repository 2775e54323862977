"""Open the `snakemake --report` HTML in headless Chromium: no script errors, and the figures render.

    python benchmarks/report_screenshot.py results/report.html --out /tmp/report-check

Then the report's own pages: `results/report/html/index.html` (or ``--index``) must link every page in
its directory, every linked file must exist, and every page must link back to the index; the index is
also opened in Chromium, which must report no error.

A probe script is added to a copy of the report: it records every error (uncaught exceptions, rejected
promises, console.error, failed resources), then asks the report's own app to display each figure in
turn and records whether the <img> decoded (natural width > 0). Chromium runs headless with a fresh
profile and no network, dumps the DOM (where the probe wrote its findings) and takes a screenshot of the
last figure shown. The last line printed is one JSON object; the exit status is 0 only when there were
no errors and every figure rendered.
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
    page = out / "report.instrumented.html"
    page.write_text(instrument(report.read_text(encoding="utf-8")), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="evoaudit-chromium-") as tmp:
        dom = run(chromium, page, Path(tmp) / "profile-dom", "--dump-dom")
        shot = out / "report.png"
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


def check_index(index: Path, out: Path, chromium: str | None) -> dict:
    """The index links every page of its directory, each link resolves, and each page links back."""
    problems: list[str] = []
    if not index.exists():
        return {"index": str(index), "ok": False, "problems": [f"{index} does not exist"], "pages": 0}
    links = _HREF.findall(index.read_text(encoding="utf-8"))
    pages = sorted(p.name for p in index.parent.glob("*.html") if p != index)
    problems += [f"index does not link {name}" for name in pages if name not in links]
    for link in links:
        target = (index.parent / link).resolve()
        if not target.exists():
            problems.append(f"index links {link}, which does not exist")
        elif target.suffix == ".html" and target.parent == index.parent.resolve():
            if index.name not in _HREF.findall(target.read_text(encoding="utf-8")):
                problems.append(f"{link} does not link back to {index.name}")
    errors: list[str] = []
    if chromium is not None:  # the page itself must load cleanly
        out.mkdir(parents=True, exist_ok=True)
        page = index.parent / f".{index.stem}.instrumented.html"  # beside it, so relative links resolve
        html = index.read_text(encoding="utf-8").replace("<head>", "<head>" + _CATCH, 1)
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
            errors.append("the index page did not finish loading")
        else:
            text = match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
            errors += json.loads(text.replace("&amp;", "&"))["errors"]
    return {
        "index": str(index),
        "pages": len(pages),
        "links": len(links),
        "problems": problems,
        "errors": errors,
        "ok": not problems and not errors,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="the HTML file written by snakemake --report")
    p.add_argument(
        "--out", type=Path, default=Path("results/report_check"), help="where to put the screenshot"
    )
    p.add_argument(
        "--index",
        type=Path,
        default=Path("results/report/html/index.html"),
        help="the report's own index page, checked too",
    )
    args = p.parse_args(argv)
    args.report, args.out, args.index = (path.resolve() for path in (args.report, args.out, args.index))
    chromium = find_chromium()
    if chromium is None:
        print(json.dumps({"ok": False, "skipped": "no chromium on PATH (apt-get install -y chromium)"}))
        return 2
    result = check(args.report, args.out, chromium)
    result["index_check"] = check_index(args.index, args.out, chromium)
    result["ok"] = result["ok"] and result["index_check"]["ok"]
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
