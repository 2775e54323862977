"""The shape of evoaudit's import graph: rooms, arrows, floors and circles, whole package and per sub-package.

    python benchmarks/import_graph.py                 # evoaudit and evoaudit.suite.apex
    python benchmarks/import_graph.py --scope evoaudit.report --json

Built with grimp (import-linter's graph library), counting imports inside functions too, as the contracts do:

- rooms: modules in the scope (a package's ``__init__`` is one module);
- arrows: direct imports between two modules of the scope;
- floors: modules on the longest import chain inside the scope (its circles each folded into one room first,
  so the chain is finite);
- circles: groups of modules that import each other round (strongly connected, more than one module).

Also counts functions longer than ``--long`` lines (default 80) under src/evoaudit (and those whose docstring
gives no reason, "Long on purpose: ...") and ``cfg: Any`` /
``config: Any`` parameters, the two other figures of the package's shape. Reads only; writes nothing.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "evoaudit"


def _in(module: str, scope: str) -> bool:
    return module == scope or module.startswith(scope + ".")


def graph_figures(graph, scope: str) -> dict[str, int]:
    """Rooms, arrows, floors and circles of the modules under ``scope``."""
    modules = sorted(m for m in graph.modules if _in(m, scope))
    inside = set(modules)
    edges = {
        m: sorted(t for t in graph.find_modules_directly_imported_by(m) if t in inside and t != m)
        for m in modules
    }
    sccs = _strongly_connected(modules, edges)
    room_of = {m: i for i, comp in enumerate(sccs) for m in comp}
    size = [len(comp) for comp in sccs]
    folded: dict[int, set[int]] = {i: set() for i in range(len(sccs))}
    for m, targets in edges.items():
        for t in targets:
            if room_of[m] != room_of[t]:
                folded[room_of[m]].add(room_of[t])

    @cache
    def depth(i: int) -> int:
        # A folded circle counts as its modules' number of floors: they lie on one chain round it.
        return size[i] + max((depth(j) for j in folded[i]), default=0)

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    return {
        "rooms": len(modules),
        "arrows": sum(len(t) for t in edges.values()),
        "floors": max((depth(i) for i in range(len(sccs))), default=0),
        "circles": sum(1 for comp in sccs if len(comp) > 1),
    }


def _strongly_connected(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    # Tarjan's algorithm, iterative (the package is deeper than Python's default recursion would like).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                out.append(sorted(comp))
    return out


def long_functions(limit: int) -> list[tuple[int, str]]:
    """(length in lines, module:qualified name) of every function under src/evoaudit longer than ``limit``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(SRC.parent).as_posix()

        def walk(node, prefix="", rel=rel):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = child.end_lineno - child.lineno + 1
                    if n > limit:
                        why = "Long on purpose" in (ast.get_docstring(child) or "")
                        found.append(
                            (n, f"{rel}:{prefix}{child.name}" + ("" if why else " (no reason given)"))
                        )
                    walk(child, f"{prefix}{child.name}.", rel)
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.", rel)

        walk(tree)
    return sorted(found, reverse=True)


def untyped_config_parameters() -> int:
    """Occurrences of ``cfg: Any`` or ``config: Any`` under src/ (the grep of issue 40)."""
    pattern = re.compile(r"cfg: Any|config: Any")
    return sum(len(pattern.findall(p.read_text(encoding="utf-8"))) for p in SRC.rglob("*.py"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--scope",
        action="append",
        help="package to measure (repeatable; default: evoaudit, evoaudit.suite.apex)",
    )
    ap.add_argument("--long", type=int, default=80, help="a function longer than this many lines is counted")
    ap.add_argument(
        "--no-type-checking",
        action="store_true",
        help="leave out imports under `if TYPE_CHECKING:` (type-only)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--list", action="store_true", help="also list the long functions")
    args = ap.parse_args(argv)
    import grimp

    graph = grimp.build_graph(
        "evoaudit",
        include_external_packages=False,
        exclude_type_checking_imports=args.no_type_checking,
        cache_dir=None,
    )
    scopes = args.scope or ["evoaudit", "evoaudit.suite.apex"]
    longs = long_functions(args.long)
    result = {
        "graph": {s: graph_figures(graph, s) for s in scopes},
        f"functions_over_{args.long}_lines": len(longs),
        "cfg_any": untyped_config_parameters(),
    }
    if args.list:
        result["long_functions"] = [f"{n:4d} {name}" for n, name in longs]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'scope':24s} {'rooms':>6s} {'arrows':>7s} {'floors':>7s} {'circles':>8s}")
    for s, fig in result["graph"].items():
        print(f"{s:24s} {fig['rooms']:6d} {fig['arrows']:7d} {fig['floors']:7d} {fig['circles']:8d}")
    unexplained = sum(name.endswith("(no reason given)") for _, name in longs)
    print(f"functions over {args.long} lines: {len(longs)} ({unexplained} without a reason in the docstring)")
    print(f"cfg: Any / config: Any: {result['cfg_any']}")
    for line in result.get("long_functions", []):
        print(" ", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
