"""Methods are plugins: no code outside ``src/evoaudit/methods/`` (nor the workflow or its scripts) asks
which method it is handling by comparing a method's or a condition's name.

The same scan as the suite-name check (``test_no_suite_name_checks``): a comparison or ``match`` case with a
method or condition name as a string literal on one side (alone or in a literal collection), and, because a
condition's name carries its method's, a ``startswith``/``endswith``/``removeprefix`` with one. Naming a
method is allowed (a default, a path, a help text); branching on it is what the ``Method`` protocol is for.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest
from test_no_suite_name_checks import _COMPARE_OPS, _COMPARE_TOKENS, REPO, _beside

from evoaudit.method_plugins import BUILT_IN
from evoaudit.methods.registry import get_method

_PREFIX_CALLS = {"startswith", "endswith", "removeprefix", "removesuffix"}


def _names() -> frozenset[str]:
    names = set(BUILT_IN)
    for m in BUILT_IN:
        names |= set(get_method(m).insertions)
        if get_method(m).learns:
            names.add(f"placebo-{m}")
    return frozenset(names)


METHOD_NAMES = _names()


def _method_literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in METHOD_NAMES:
        return node.value
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return next((n for n in map(_method_literal, node.elts) if n), None)
    return None


def python_violations(source: str, filename: str = "<string>") -> list[str]:
    """Every place ``source`` compares with a method's name, as ``file:line: what``."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare) and any(isinstance(op, _COMPARE_OPS) for op in node.ops):
            name = next((n for n in map(_method_literal, [node.left, *node.comparators]) if n), None)
            if name:
                out.append(f"{filename}:{node.lineno}: compares with method name {name!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _PREFIX_CALLS:
                name = next((n for n in map(_method_literal, node.args) if n), None)
                if name:
                    out.append(f"{filename}:{node.lineno}: {node.func.attr} with method name {name!r}")
        elif isinstance(node, ast.match_case):
            for pattern in ast.walk(node.pattern):
                if isinstance(pattern, ast.MatchValue) and _method_literal(pattern.value):
                    out.append(f"{filename}:{pattern.lineno}: match case on method name")
    return out


def snakemake_violations(source: str, filename: str = "<string>") -> list[str]:
    """A method name's string literal next to a comparison operator, token by token."""
    toks = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    ]
    out = []
    for i, t in enumerate(toks):
        if t.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(t.string)
        except (ValueError, SyntaxError):
            continue
        if value in METHOD_NAMES and {_beside(toks, i, -1), _beside(toks, i, 1)} & _COMPARE_TOKENS:
            out.append(f"{filename}:{t.start[0]}: compares with method name {value!r}")
    return out


def _scanned_files() -> list[Path]:
    src = REPO / "src" / "evoaudit"
    files = [p for p in src.rglob("*.py") if (src / "methods") not in p.parents]
    files += sorted((REPO / "scripts").rglob("*.py"))
    files += [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]
    files += sorted((REPO / "workflow").rglob("*.py"))
    return files


def test_no_code_outside_methods_compares_a_method_name():
    found = []
    for path in _scanned_files():
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(REPO))
        found += python_violations(text, rel) if path.suffix == ".py" else snakemake_violations(text, rel)
    assert not found, "ask the method (methods.registry, Method protocol) instead of its name:\n" + "\n".join(
        found
    )


def test_the_scan_covers_config_seal_evaluate_replay_report_and_the_workflow():
    files = {str(p.relative_to(REPO)) for p in _scanned_files()}
    for layer in ("seal", "evaluate", "replay", "report", "ops"):
        assert any(f.startswith(f"src/evoaudit/{layer}/") for f in files), layer
    assert "src/evoaudit/config/checks.py" in files and "workflow/rules/common.smk" in files
    assert not any(f.startswith("src/evoaudit/methods/") for f in files)
    assert {"static", "skillopt", "awm", "reasoningbank", "awm-literal", "placebo-awm"} <= METHOD_NAMES


@pytest.mark.parametrize(
    "code",
    [
        "if method == 'skillopt':\n    pass\n",
        "x = 'reasoningbank' != cond\n",
        "ok = m in ('static', 'other')\n",
        "real = c.startswith('awm-literal')\n",
        "base = name.removeprefix('placebo-awm')\n",
        "match cond:\n    case 'awm-adapted':\n        pass\n",
        "skip = [m for m in methods if m != 'static']\n",
    ],
)
def test_the_scanner_flags_a_planted_method_name_comparison(code):
    assert python_violations(code)


@pytest.mark.parametrize(
    "code",
    [
        "m = get_method('skillopt')\n",
        "p = results / 'artifacts' / 'awm'\n",
        "def f(baseline='static'):\n    return baseline\n",
        "if c.startswith('placebo-'):\n    pass\n",
    ],
)
def test_the_scanner_leaves_naming_a_method_without_branching_on_it(code):
    assert not python_violations(code)


def test_the_snakemake_scan_flags_a_planted_comparison_and_leaves_paths():
    assert snakemake_violations('rule x:\n    params: on=wildcards.method == "awm"\n')
    assert not snakemake_violations('rule y:\n    output: "results/artifacts/L1/awm/meta.json"\n')


def test_a_planted_violation_in_a_scanned_file_fails_the_scan(tmp_path, monkeypatch):
    """The whole-tree test can fail: a copy of a scanned file with one method-name branch added is found."""
    planted = tmp_path / "coverage.py"
    source = (REPO / "src" / "evoaudit" / "seal" / "coverage.py").read_text()
    planted.write_text(
        source + "\n\ndef evolved(cfg):\n    return [m for m in cfg.methods if m != 'static']\n"
    )
    assert python_violations(planted.read_text(), "coverage.py") == [
        f"coverage.py:{len(planted.read_text().splitlines())}: compares with method name 'static'"
    ]
