"""One door per suite: no code above ``src/evoaudit/suite/`` (nor the workflow or its scripts) asks which
suite is running by comparing a suite's name.

A Python file is scanned on its syntax tree: a comparison (``==``, ``!=``, ``in``, ``not in``, ``is``) or a
``match`` case with a registered suite name as a string literal on one side (alone, or in a tuple, list or
set literal), and any comparison of ``<...>.suite.name`` with a string literal. The Snakemake files are not
Python, so they are scanned token by token for the same shapes. Naming a suite is allowed (asking the
registry for it, a path, a default argument); branching on the name is what the suite's interface is for.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from evoaudit.suite.registry import names

REPO = Path(__file__).resolve().parents[2]
SUITE_NAMES = frozenset(names("suite")) | frozenset(names("checker_audit"))
_COMPARE_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
_COMPARE_TOKENS = {"==", "!=", "in", "is"}


def _suite_literal(node: ast.AST) -> str | None:
    """The suite name ``node`` is (a string literal) or holds (a tuple, list or set of literals)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SUITE_NAMES:
        return node.value
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return next((n for n in map(_suite_literal, node.elts) if n), None)
    return None


def _is_suite_name(node: ast.AST) -> bool:
    """``<...>.suite.name`` (the configured suite's name)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "name"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "suite"
    )


def python_violations(source: str, filename: str = "<string>") -> list[str]:
    """Every place ``source`` compares a suite's name, as ``file:line: what``."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare) and any(isinstance(op, _COMPARE_OPS) for op in node.ops):
            sides = [node.left, *node.comparators]
            name = next((n for n in map(_suite_literal, sides) if n), None)
            if name:
                out.append(f"{filename}:{node.lineno}: compares with suite name {name!r}")
            elif any(map(_is_suite_name, sides)) and any(
                isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides
            ):
                out.append(f"{filename}:{node.lineno}: compares suite.name with a string")
        elif isinstance(node, ast.match_case):
            for pattern in ast.walk(node.pattern):
                if isinstance(pattern, ast.MatchValue) and _suite_literal(pattern.value):
                    out.append(f"{filename}:{pattern.lineno}: match case on suite name")
    return out


def _beside(toks: list[tokenize.TokenInfo], i: int, step: int) -> str:
    """The first token from ``toks[i]`` towards ``step`` that is not part of a literal collection (other
    strings, brackets, commas): the operator a suite name in ``in ("a", "b")`` stands beside."""
    j = i + step
    while 0 <= j < len(toks) and (toks[j].type == tokenize.STRING or toks[j].string in set("()[]{},")):
        j += step
    return toks[j].string if 0 <= j < len(toks) else ""


def snakemake_violations(source: str, filename: str = "<string>") -> list[str]:
    """The same shapes in a Snakemake file, token by token: a suite name's string literal next to a
    comparison operator, and ``suite.name`` followed by one."""
    toks = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    ]
    out = []
    for i, t in enumerate(toks):
        if t.type == tokenize.STRING:
            try:
                value = ast.literal_eval(t.string)
            except (ValueError, SyntaxError):
                continue
            if value in SUITE_NAMES and {_beside(toks, i, -1), _beside(toks, i, 1)} & _COMPARE_TOKENS:
                out.append(f"{filename}:{t.start[0]}: compares with suite name {value!r}")
        elif t.string == "suite" and 0 < i < len(toks) - 3 and toks[i - 1].string == ".":
            if [x.string for x in toks[i + 1 : i + 4]] in ([".", "name", op] for op in _COMPARE_TOKENS):
                out.append(f"{filename}:{t.start[0]}: compares suite.name")
    return out


def _scanned_files() -> list[Path]:
    src = REPO / "src" / "evoaudit"
    files = [p for p in src.rglob("*.py") if (src / "suite") not in p.parents]
    files += sorted((REPO / "scripts").rglob("*.py"))
    files += [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]
    files += sorted((REPO / "workflow").rglob("*.py"))
    return files


def test_no_code_above_suite_compares_a_suite_name():
    found = []
    for path in _scanned_files():
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(REPO))
        found += python_violations(text, rel) if path.suffix == ".py" else snakemake_violations(text, rel)
    assert not found, "ask the suite's interface (suite.registry) instead of its name:\n" + "\n".join(found)


def test_the_scan_covers_the_package_scripts_and_workflow():
    files = {str(p.relative_to(REPO)) for p in _scanned_files()}
    assert {"src/evoaudit/cli/apex.py", "Snakefile", "workflow/rules/common.smk"} <= files
    assert not any(f.startswith("src/evoaudit/suite/") for f in files)
    assert SUITE_NAMES >= {"banking", "apex", "workspace", "travel", "slack"}


@pytest.mark.parametrize(
    "code",
    [
        "if cfg.suite.name == 'banking':\n    pass\n",
        "x = 'apex' != name\n",
        "ok = suite in ('travel', 'other')\n",
        "ok = name not in {'slack'}\n",
        "if cfg.suite.name != 'newsuite':\n    pass\n",
        "match name:\n    case 'workspace':\n        pass\n",
        "match name:\n    case 'a' | 'banking':\n        pass\n",
    ],
)
def test_the_scanner_flags_a_planted_suite_name_comparison(code):
    assert python_violations(code)


@pytest.mark.parametrize(
    "code",
    [
        "s = get_suite('banking')\n",
        "p = results / 'apex' / 'runs'\n",
        "def f(suite='banking'):\n    return suite\n",
        "if spec.suite != cfg.suite.name:\n    raise ValueError\n",
        "if kind == 'rubric':\n    pass\n",
    ],
)
def test_the_scanner_leaves_naming_a_suite_without_branching_on_it(code):
    assert not python_violations(code)


def test_the_snakemake_scan_flags_a_planted_comparison_and_leaves_paths():
    rule = 'rule x:\n    input: f"{R}/apex/a.json"\n    params: on=CFG.suite.name == "banking"\n'
    assert snakemake_violations(rule) == [
        "<string>:3: compares suite.name",
        "<string>:3: compares with suite name 'banking'",
    ]
    assert snakemake_violations('if config["suite"] in ("apex",):\n    pass\n')
    assert snakemake_violations("if CFG.suite.name != X:\n    pass\n")
    assert not snakemake_violations('rule y:\n    output: "results/apex/x.json"\n')
