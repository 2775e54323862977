"""Time building all fifteen APEX worlds at a given scale (target: <= 60 s at scale 1.0 on 2 cores).

    python benchmarks/apex_build.py [--scale 1.0] [--out /tmp/apex-bench]

Prints one JSON line: seconds, files per world, and whether a second build was byte-identical.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from evoaudit.suite.apex.build import build_all


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="apex-bench-"))
    t0 = time.perf_counter()
    first = build_all(root / "a", scale=args.scale)
    seconds = time.perf_counter() - t0
    second = build_all(root / "b", scale=args.scale)
    identical = (
        all(
            f.read_bytes() == (root / "b" / f.relative_to(root / "a")).read_bytes()
            for f in sorted((root / "a").rglob("*.zip"))
        )
        and first == second
    )
    print(
        json.dumps(
            {
                "scale": args.scale,
                "seconds_all_15": round(seconds, 2),
                "files": [t["n_files"] for t in first["tasks"]],
                "byte_identical_rebuild": identical,
            }
        )
    )


if __name__ == "__main__":
    main()
