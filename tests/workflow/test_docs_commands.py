"""Every shell command the documentation gives works as written.

Commands are taken from the ```bash blocks of README.md, docs/*.md and config/README.md and from the
indented command lines (``#   snakemake ...``) in the headers of config/examples/*.yaml. Each is checked
without doing its work: a ``snakemake`` command's arguments must parse with Snakemake's own parser (every
--configfile an existing file, every --resources entry NAME=VALUE, every target a rule or a path, cores
given where a local run needs them), and it must succeed as a dry run in a copy of the workflow (the slow
test); an ``evoaudit`` command's subcommand and flags must parse; ``python benchmarks/X.py`` must name a
script whose ``--help`` lists every flag used; ``bash X`` must name an existing script.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit import cli

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config" / "README.md"]
EXAMPLES = sorted((REPO / "config" / "examples").glob("*.yaml"))
CHECKED = ("snakemake", "evoaudit", "python", "bash")
PLACEHOLDERS = {"…", "...", "'...'"}
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_HEADER_COMMAND = re.compile(r"^#\s{2,}((?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:snakemake|evoaudit|python|bash)\s.*)$")


def _bash_lines(path: Path) -> list[str]:
    lines, block, cont = [], False, ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip().startswith("```"):
            block = raw.strip() == "```bash" if not block else False
            continue
        if not block:
            continue
        line = cont + raw.strip()
        if line.endswith("\\"):
            cont = line[:-1] + " "
            continue
        cont = ""
        lines.append(line)
    return lines


def _header_lines(path: Path) -> list[str]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            break  # the header ends at the first line that is not a comment
        if m := _HEADER_COMMAND.match(raw):
            out.append(m.group(1))
    return out


def _commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line, each without its leading VAR=value assignments."""
    tokens = shlex.split(line, comments=True)
    commands, cur = [], []
    for tok in tokens:
        end = tok.endswith(";") and tok != ";"
        tok = tok.removesuffix(";") if end else tok
        if tok in ("&&", "||", "|", ";"):
            commands.append(cur)
            cur = []
        elif tok not in ("{", "}"):
            cur.append(tok)
        if end:
            commands.append(cur)
            cur = []
    commands.append(cur)
    out = []
    for cmd in commands:
        while cmd and _ENV.match(cmd[0]):
            cmd = cmd[1:]
        if cmd:
            out.append(cmd)
    return out


@functools.cache
def documented() -> list[tuple[str, list[str]]]:
    """(where, argv) of every command this test checks (``python -m`` ones are not)."""
    found = []
    for path in DOCS:
        found += [(path.relative_to(REPO).as_posix(), line) for line in _bash_lines(path)]
    for path in EXAMPLES:
        found += [(path.relative_to(REPO).as_posix(), line) for line in _header_lines(path)]
    out = []
    for where, line in found:
        for argv in _commands(line):
            if argv[0] in CHECKED and (argv[0] != "python" or argv[1:2] != ["-m"]):
                out.append((f"{where}: {line}", argv))
    return out


def _rules() -> set[str]:
    text = (REPO / "Snakefile").read_text()
    text += "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    return set(re.findall(r"^rule (\w+):", text, flags=re.M))


def test_the_documentation_has_the_commands_it_should():
    argvs = [argv for _, argv in documented()]
    assert sum(a[0] == "snakemake" for a in argvs) >= 15, argvs
    assert any(a[:2] == ["evoaudit", "validate-config"] for a in argvs)
    headers = {w.split(":")[0] for w, a in documented() if w.startswith("config/examples/")}
    # every example names its command in its header
    assert headers == {p.relative_to(REPO).as_posix() for p in EXAMPLES}, headers


def _check_snakemake(argv: list[str]) -> str | None:
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    try:
        args = parser.parse_args(argv[1:])
    except (SystemExit, ValueError) as exc:  # --resources api_slots=2 apex: a ValueError
        return f"Snakemake's parser refuses the arguments ({exc}): did an option swallow a target?"
    for f in args.configfile or []:
        if not (REPO / f).is_file():
            return f"--configfile {f}: no such file (did --configfile swallow a target? put targets first)"
    rules = _rules()
    for t in args.targets or []:
        if t not in rules and "/" not in t:
            return f"target {t!r} is neither a rule nor a path"
    local = not (args.workflow_profile or args.profile or args.executor)
    needs_cores = local and not (args.dryrun or args.report or args.unlock)
    if needs_cores and args.cores is None and args.jobs is None:
        return "a local run needs --cores (or --jobs)"
    return None


def _evoaudit_parser(argv: list[str]):
    """The (sub)parser that argv's subcommands lead to."""
    import argparse

    parser = cli.build_parser()
    for tok in argv[1:]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and tok in subs[0].choices:
            parser = subs[0].choices[tok]
    return parser


def _check_evoaudit(argv: list[str]) -> str | None:
    # `[--out DIR]` and `[--format eval|json]` in a usage line: the options as if given.
    args = []
    for tok in argv[1:]:
        tok = tok.strip("[]")
        args.append(tok.split("|")[0] if "|" in tok and not tok.startswith("-") else tok)
    placeholder = any(t in PLACEHOLDERS for t in args)
    args = [t for t in args if t not in PLACEHOLDERS]
    if not placeholder:
        try:
            cli.build_parser().parse_args(args)
        except SystemExit:
            return "evoaudit's parser refuses the arguments"
        return None
    # A placeholder stands for required arguments: the subcommand and every flag given must exist.
    parser = _evoaudit_parser(argv)
    if parser.prog == "evoaudit":
        return "no subcommand"
    known = {s for a in parser._actions for s in a.option_strings} | {"--no-cache", "-v", "--verbose"}
    unknown = [t for t in args if t.startswith("-") and t.split("=")[0] not in known]
    return f"unknown flags {unknown} for {parser.prog}" if unknown else None


@functools.cache
def _help(script: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout + proc.stderr


def _check_python(argv: list[str]) -> str | None:
    script = argv[1]
    if not script.startswith("benchmarks/"):
        return None
    if not (REPO / script).is_file():
        return f"{script}: no such file"
    rc, text = _help(script)
    if rc != 0:
        return f"{script} --help exits {rc}: {text[-500:]}"
    flags = [t.split("=")[0] for t in argv[2:] if t.startswith("-")]
    missing = [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text)]
    return f"{script} does not accept {missing}" if missing else None


def _check_bash(argv: list[str]) -> str | None:
    return None if (REPO / argv[1]).is_file() else f"{argv[1]}: no such script"


CHECKS = {
    "snakemake": _check_snakemake,
    "evoaudit": _check_evoaudit,
    "python": _check_python,
    "bash": _check_bash,
}


def test_every_documented_command_parses():
    problems = []
    for where, argv in documented():
        if (why := CHECKS[argv[0]](argv)) is not None:
            problems.append(f"{where}\n    {why}")
    assert not problems, "commands that fail as written:\n" + "\n".join(problems)


def _dry_runs() -> list[tuple[str, list[str]]]:
    seen, out = set(), []
    for where, argv in documented():
        if argv[0] != "snakemake" or "--report" in argv or "--unlock" in argv:
            continue  # --report and --unlock work on a finished run; their arguments are parsed above
        if tuple(argv) not in seen:
            seen.add(tuple(argv))
            out.append((where, argv))
    return out


@pytest.mark.slow  # about 6 s per distinct command (three dozen), two at a time
def test_every_documented_snakemake_command_succeeds_as_a_dry_run(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    # Each copy is the repository as a newcomer runs it: the shipped config (APEX-Harm on), the examples
    # and the workflow profile. Two copies, one per concurrent dry run: a dry run writes nothing, but each
    # keeps its own directory all the same.
    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    works = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        work = copy_workflow(tmp_path / name, {"apex": shipped.get("apex") or {}})
        shutil.copytree(REPO / "config" / "examples", work / "config" / "examples")
        shutil.copytree(REPO / "profiles", work / "profiles")
        works.append(work)
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401

        slurm = True
    except ImportError:
        slurm = False
    # needs pip install -e '.[slurm]'; tests/ops/test_ops_slurm.py runs that profile
    runs = [(w, a) for w, a in _dry_runs() if slurm or "workflow/profiles/slurm" not in a]

    def dry_run(k: int) -> str | None:
        where, argv = runs[k]
        proc = snakemake(works[k % 2], "-n", *argv[1:], check=False)
        return None if proc.returncode == 0 else f"{where}\n    {(proc.stdout + proc.stderr)[-1500:]}"

    # Most of a dry run is the interpreter's start and the workflow's parse: two at a time use both cores
    # while the other slow tests wait on their subprocesses.
    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for p in pool.map(dry_run, range(len(runs))) if p is not None]
    assert not problems, "dry runs that fail:\n" + "\n".join(problems)


def test_readme_is_short_and_opens_with_the_prerequisites_and_the_two_setup_commands():
    text = (REPO / "README.md").read_text()
    assert len(text) < 15_000, f"README.md is {len(text)} characters; move detail to docs/"
    first, second = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)[:2]
    for command in (first, second):
        assert command.startswith("apt-get update -qq && apt-get install -y -qq bubblewrap gcc")
    assert first.endswith("snakemake --cores 2") and second.endswith("pytest -n auto")
    assert text.index("disk") < text.index(first)  # what it needs is said before the command
