"""Open a run's Inspect AI logs in `inspect view`, in headless Chromium, and take three screenshots.

    evoaudit export inspect --out results/export/inspect
    python benchmarks/inspect_view_screenshot.py results/export/inspect --out benchmarks/output/inspect_view

Needs the inspect extra, Chromium (`apt-get install chromium`) and Playwright (`pip install playwright`;
no browser download: it drives the system Chromium). `inspect view` serves the directory on a free port of
127.0.0.1; the log list must show one row per log (Inspect hides logs it takes for retries of another),
then the first Banking log and one of its samples are opened. Writes ``list.png``, ``log.png`` and
``sample.png``; the last line printed is one JSON object, and the exit status is 0 only when the list
showed every log and the sample page its messages.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"inspect view did not answer at {url} within {timeout_s:g} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", type=Path, help="directory of .eval logs (evoaudit export inspect --out)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/output/inspect_view"))
    ap.add_argument("--wait-s", type=float, default=30.0, help="time the log list gets to load every header")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    logs = sorted(args.logs.glob("*.eval"))
    banking = next((p for p in logs if p.name.startswith("banking_")), None)
    if banking is None:
        raise SystemExit(f"{args.logs}: no banking_*.eval log")
    chromium = next((shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n)), None)
    if chromium is None:
        raise SystemExit("no Chromium on PATH: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    inspect = shutil.which("inspect") or "inspect"
    cmd = [inspect, "view", "--log-dir", str(args.logs.resolve()), "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found: dict = {"logs": len(logs), "port": port}
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait(url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_timeout(args.wait_s * 1000)
            page.screenshot(path=str(args.out / "list.png"))
            shown = re.search(r"(\d+) items", page.inner_text("body"))
            found["rows_listed"] = int(shown.group(1)) if shown else None
            page.goto(f"{url}#/logs/{banking.name}")
            page.wait_for_timeout(10000)
            page.screenshot(path=str(args.out / "log.png"))
            page.locator("text=/L\\d+\\/[^ ]+\\/(benign|attacked)\\//").first.click()
            page.wait_for_timeout(5000)
            page.screenshot(path=str(args.out / "sample.png"))
            body = page.inner_text("body")
            found["sample_has_messages"] = "SYSTEM" in body and "USER" in body
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    found["screenshots"] = [str(args.out / n) for n in ("list.png", "log.png", "sample.png")]
    ok = found["rows_listed"] == len(logs) and found["sample_has_messages"]
    print(json.dumps(found | {"ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
