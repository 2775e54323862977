"""The audit bundle: one archive from which a reviewer re-derives every table and figure without a model.

``evoaudit bundle`` packs a run's results directory (the frozen suite spec, instances with the endpoint
file, artifacts, freeze manifests and the unseal log, every rollout, the judge's decisions, replay and
determinism reports, tables, figures, pages, the resolved config and every provenance record) and the
response caches of its endpoints, as key-ordered JSON lines, with ``BUNDLE.json``: every file's size and
sha256 and one root hash over them.

What differs between two runs of the same configuration only because they ran at another moment is kept
out of the root and beside it: files that hold nothing but timing (a shard's ``*.timing.tsv``, the jobs'
benchmark tables) are listed as ``beside``, and a JSON record's top-level timing keys (an unseal event's
time) are left out of its ``content_sha256``. Each entry names the keys left out. So two independent runs
of the default configuration give bundles with the same root; the archives' bytes still differ.

``evoaudit reproduce BUNDLE`` unpacks the bundle into a fresh work directory (regular files only, each
checked against the manifest), removes what is derived from the records (replay reports, the Banking and
APEX-Harm reports) and asks Snakemake to rebuild exactly that with the workflow of this checkout:
``--allowed-rules`` admits only the replay and report rules, the only rerun trigger is a missing file
(every unpacked file has one modification time), and ``EVOAUDIT_NO_MODEL_CALLS`` makes any backend, the
simulator included, refuse to start. It then compares every re-derived file with the bundle's bytes.
"""

from __future__ import annotations

import fnmatch
import functools
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoaudit import atomic
from evoaudit.config import Config, load
from evoaudit.errors import AuditError
from evoaudit.hashing import canonical_json, sha256_file
from evoaudit.jsonl import TIMING_SUFFIX
from evoaudit.offline import NO_MODEL_CALLS_ENV
from evoaudit.paths import BENCHMARKS, RELATIVE, REPLAY
from evoaudit.provenance import code_revision

SCHEMA_VERSION = 2
MANIFEST_NAME = "BUNDLE.json"
# Every unpacked file gets this modification time, so that no file looks newer than what it was made from.
_MTIME = 946684800  # 2000-01-01T00:00:00Z
_MANIFEST_LIMIT = 64 << 20
# Top-level names of a checkout a bundle may never write into a work directory.
_RESERVED = frozenset({"cache", "config", "workflow", "scripts", "profiles", "src", "tests", "Snakefile"})

# Results paths (posix, relative to the results directory) a bundle never holds: the jobs' logs (host
# paths, timings; the benchmark tables keep the timings), unfinished or moved-aside work's temporary files,
# exports (derived again by their commands).
_LEFT_OUT = (RELATIVE.logs_dir() + "/*", RELATIVE.export("*"), "*.partial", "*.tmp", ".*", "*/.*")
# Timing only: carried beside the root.
_BESIDE = (f"{BENCHMARKS}/*", f"*{TIMING_SUFFIX}")
# Top-level keys of a JSON record (or of each line of a JSON-lines file) that hold when it was written, and
# the only files (relative to results_dir) whose timing keys are left out of their content hash: the seal's
# unseal events (the shards keep their wall times in their timing files).
TIMING_KEYS = ("time", "unsealed_at")
_TIMED = (
    RELATIVE.freeze("unseal.json"),
    RELATIVE.freeze("unseal.json", "*"),
    RELATIVE.freeze("unseal_log.jsonl"),
)
# At most this many files, and bytes in all, in a bundle a reproduction unpacks.
MAX_FILES = 200_000
MAX_BYTES = 16 << 30
# What `reproduce` derives again from the other files: the replay reports and both suites' reports.
DERIVED = (
    RELATIVE.replay_root() + "/*",
    RELATIVE.replay_root(defense="*") + "/*",
    RELATIVE.replay_root(round="*") + "/*",
    RELATIVE.apex(REPLAY, "*"),
    RELATIVE.apex("*", REPLAY, "*"),
    RELATIVE.report("*"),
    RELATIVE.apex_report("*"),
)
# The rules that derive them (and the aggregate targets that ask for them).
DERIVING_RULES = (
    "replay",
    "apex_replay",
    "apex_replay_defended",
    "report",
    "apex_report",
    "apex_ablation_table",
    "apex_defense_table",
)


class BundleEntry(BaseModel):
    """One file of the bundle."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """Path inside the archive, as in the working directory of the run: ``<results_dir>/...``, the worlds'
    ``<suite.apex.out>/...`` when they are cached elsewhere, or ``cache/<file>.jsonl``."""
    bytes: int
    """Size of the file as archived."""
    sha256: str
    """sha256 of the file's bytes as archived."""
    content_sha256: str
    """What the root covers: ``sha256`` unless ``timing_keys`` were left out of a JSON record, in which case
    the sha256 of the canonical JSON (each line's, for JSON lines) without them."""
    timing_keys: list[str] = Field(default_factory=list)
    """Top-level keys present in the file and left out of ``content_sha256``."""
    role: Literal["record", "derived", "beside"]
    """``record``: made by a stage that ran a model or built the suite; ``derived``: re-derived from the
    records by ``reproduce``; ``beside``: timing only, kept out of the root."""


class BundleManifest(BaseModel):
    """``BUNDLE.json``: what the bundle holds, and the root over everything but timing."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    root: str
    """sha256 over the sorted (path, content_sha256) of every entry whose role is not ``beside``."""
    results_dir: str
    """The run's ``results_dir`` (relative); its resolved config is ``<results_dir>/config/config.json``."""
    dirs: list[str]
    """Every directory the entries lie under (``results_dir``, ``suite.apex.out`` outside it, ``cache``)."""
    entries: list[BundleEntry]
    """Every file, sorted by path."""
    code: dict
    """The code revision of the checkout that wrote the bundle (``provenance.code_revision``)."""
    timing_keys: list[str] = Field(default_factory=lambda: list(TIMING_KEYS))
    """The top-level JSON keys that count as timing."""
    derived_patterns: list[str] = Field(default_factory=lambda: list(DERIVED))
    """Results paths that ``reproduce`` derives again."""


class FileCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    status: Literal["identical", "differs", "missing", "extra"]
    """``missing``: in the bundle, not re-derived; ``extra``: re-derived, not in the bundle."""
    bundle_sha256: str | None
    rederived_sha256: str | None


class ReproduceReport(BaseModel):
    """What ``evoaudit reproduce`` found: every derived file, byte for byte."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    bundle: str
    root: str
    """The bundle manifest's root (recomputed from its entries and checked)."""
    workdir: str
    """Where the bundle was unpacked and the derived files rebuilt."""
    command: list[str]
    """The Snakemake command that rebuilt them."""
    model_calls: str = "refused"
    """Every backend refused to start during the rebuild (``EVOAUDIT_NO_MODEL_CALLS``)."""
    bundle_code: dict
    code: dict
    """Code revisions of the checkout that wrote the bundle and of this one; provenance records name the
    revision, so a different one makes those files differ."""
    files: list[FileCheck]
    identical: int
    differing: int
    missing: int
    extra: int


class BundleError(AuditError):
    pass


def _matches(rel: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) for p in patterns)


def root_of(entries: list[BundleEntry]) -> str:
    h = hashlib.sha256()
    for e in sorted(entries, key=lambda e: e.path):
        if e.role != "beside":
            h.update(f"{e.path}\0{e.content_sha256}\n".encode())
    return h.hexdigest()


def _content(data: bytes, rel: str) -> tuple[str, list[str]]:
    """(content sha256, timing keys left out) of a file's bytes; ``rel``: its path under results_dir."""
    raw = hashlib.sha256(data).hexdigest()
    if not _matches(rel, _TIMED):
        return raw, []
    try:
        text = data.decode("utf-8")
        records = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if rel.endswith(".jsonl")
            else [json.loads(text)]
        )
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw, []
    found = sorted({k for r in records if isinstance(r, dict) for k in r if k in TIMING_KEYS})
    if not found:
        return raw, []
    h = hashlib.sha256()
    for r in records:
        kept = {k: v for k, v in r.items() if k not in TIMING_KEYS} if isinstance(r, dict) else r
        h.update(canonical_json(kept).encode() + b"\n")
    return h.hexdigest(), found


def _entry(path: str, data: bytes | Path, role: str, rel: str = "") -> BundleEntry:
    """``data``: the bytes, or the file holding them (hashed as a stream; only a seal event, which is
    small, is read whole for its content hash)."""
    if isinstance(data, Path):
        size, sha = data.stat().st_size, sha256_file(data)
        content, keys = _content(data.read_bytes(), rel) if _matches(rel, _TIMED) else (sha, [])
    else:
        size, sha = len(data), hashlib.sha256(data).hexdigest()
        content, keys = _content(data, rel)
    return BundleEntry(
        path=path,
        bytes=size,
        sha256=sha,
        content_sha256=content,
        timing_keys=keys,
        role=role,  # type: ignore[arg-type]
    )


def _under(path: str, results_dir: str) -> str | None:
    """``path`` relative to ``results_dir``, or None when it lies outside it."""
    p = PurePosixPath(path)
    return p.relative_to(results_dir).as_posix() if p.is_relative_to(results_dir) else None


def _role(rel: str) -> str:
    """The role of a path under results_dir; the same rule when writing and when reproducing."""
    return "beside" if _matches(rel, _BESIDE) else "derived" if _matches(rel, DERIVED) else "record"


def _results_files(results: Path, prefix: str, derive: bool = True) -> list[tuple[str, Path, str, str]]:
    """(archive path, file, role, path under results_dir or "") for every file under ``results`` that a
    bundle holds, as ``prefix/...``."""
    out = []
    for f in sorted(results.rglob("*")):
        if f.is_symlink():
            raise BundleError(f"{f}: a symbolic link in the results directory; a bundle holds regular files")
        if not f.is_file():
            continue
        rel = f.relative_to(results).as_posix()
        if _matches(rel, _LEFT_OUT):
            continue
        out.append((f"{prefix}/{rel}", f, _role(rel) if derive else "record", rel if derive else ""))
    return out


def cache_exports(cfg: Config) -> dict[str, bytes]:
    """Each response cache the configuration uses, as key-ordered JSON lines: ``cache/<role>.jsonl``."""
    from evoaudit.models.cache import ResponseCache

    out: dict[str, bytes] = {}
    seen: set[Path] = set()
    for role, ep in cfg.endpoint_roles():
        path = Path(ep.cache_path)
        if ep.backend != "openai" or not ep.cache or not path.exists() or path.resolve() in seen:
            continue
        seen.add(path.resolve())  # one file per cache, named by the first role that uses it
        cache = ResponseCache(path)
        try:
            out[f"cache/{role}.jsonl"] = "".join(canonical_json(r) + "\n" for r in cache.rows()).encode()
        finally:
            cache.close()
    return out


def _add(tar: tarfile.TarFile, path: str, data: bytes | Path, size: int) -> None:
    info = tarfile.TarInfo(path)
    info.size, info.mtime, info.mode = size, _MTIME, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if isinstance(data, Path):
        with open(data, "rb") as fh:  # streamed: a run's files are never all in memory
            tar.addfile(info, fh)
    else:
        tar.addfile(info, io.BytesIO(data))


def _relative_dir(value: str, key: str) -> str:
    p = PurePosixPath(value.rstrip("/"))  # "./r" is "r"
    if p.is_absolute() or not p.parts or p.parts[0] in _RESERVED or p.parts[0].startswith("."):
        raise BundleError(
            f"{key}: {value!r}; a bundle mirrors the run's working directory, so {key} must be a relative "
            f"directory not starting with '.' nor named {', '.join(sorted(_RESERVED))}"
        )
    return p.as_posix()


def write_bundle(cfg: Config, results: Path, out: Path) -> BundleManifest:
    """Write the bundle of ``results`` (the run of ``cfg``) to ``out`` (a .tar.gz); return its manifest."""
    if not (results / "config" / "config.json").exists():
        raise BundleError(
            f"{results}: no config/config.json; bundle a results directory that a workflow run wrote"
        )
    prefix = _relative_dir(cfg.results_dir, "results_dir")
    dirs = [prefix, "cache"]
    found = _results_files(results, prefix)
    worlds = Path(cfg.suite.apex.out)
    if worlds.exists() and not worlds.resolve().is_relative_to(results.resolve()):
        apex_out = _relative_dir(cfg.suite.apex.out, "suite.apex.out")
        dirs.append(apex_out)
        found += _results_files(worlds, apex_out, derive=False)
    files: dict[str, tuple[bytes | Path, str, str]] = {}
    for name, f, role, rel in found:
        if f.resolve() == out.resolve():
            continue
        files[name] = (f, role, rel)
    for name, data in cache_exports(cfg).items():
        files[name] = (data, "record", "")
    entries = [_entry(name, data, role, rel) for name, (data, role, rel) in sorted(files.items())]
    manifest = BundleManifest(
        root=root_of(entries),
        results_dir=prefix,
        dirs=sorted(set(dirs)),
        entries=entries,
        code=code_revision(),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            text = (manifest.model_dump_json(indent=2) + "\n").encode()
            _add(tar, MANIFEST_NAME, text, len(text))
            sizes = {e.path: e.bytes for e in entries}
            for name, (data, _role, _rel) in sorted(files.items()):
                _add(tar, name, data, sizes[name])
    os.replace(tmp, out)
    return manifest


def _safe_name(name: str, dirs: list[str]) -> bool:
    p = PurePosixPath(name)
    return (
        p.as_posix() == name  # normalised: no "//", no trailing "/"
        and "." not in name.split("/")
        and len(name.encode()) <= 1024
        and all(len(part.encode()) <= 255 for part in p.parts)
        and not p.is_absolute()
        and ".." not in p.parts
        and any(p.is_relative_to(d) and p != PurePosixPath(d) for d in dirs)
        and all(c.isprintable() and c != "\\" for c in name)
    )


def _check_manifest(bundle: Path, manifest: BundleManifest) -> dict[str, BundleEntry]:
    if root_of(manifest.entries) != manifest.root:
        raise BundleError(f"{bundle}: {MANIFEST_NAME}'s root does not match its entries (edited)")
    for d in manifest.dirs:
        if d != "cache":  # never the workflow's own files, nothing hidden
            _relative_dir(d, f"{MANIFEST_NAME} dirs")
    if manifest.results_dir not in manifest.dirs:
        raise BundleError(f"{bundle}: {MANIFEST_NAME}: results_dir is not among its dirs")
    _relative_dir(manifest.results_dir, f"{MANIFEST_NAME} results_dir")
    listed = {e.path: e for e in manifest.entries}
    if len(listed) != len(manifest.entries):
        raise BundleError(f"{bundle}: {MANIFEST_NAME} lists a path twice")
    if len(listed) > MAX_FILES or sum(e.bytes for e in manifest.entries) > MAX_BYTES:
        raise BundleError(f"{bundle}: more than {MAX_FILES} files or {MAX_BYTES} bytes; not unpacked")
    for name in listed:
        if not _safe_name(name, manifest.dirs):
            raise BundleError(f"{bundle}: {MANIFEST_NAME} lists {name!r}, not a path under {manifest.dirs}")
    if f"{manifest.results_dir}/config/config.json" not in listed:
        raise BundleError(f"{bundle}: no {manifest.results_dir}/config/config.json; not a run's bundle")
    # No listed file may also be a folder another one lies in.
    folders = {str(a) for n in listed for a in PurePosixPath(n).parents}
    if clash := sorted(folders & set(listed)):
        raise BundleError(f"{bundle}: {clash[0]!r} is listed as a file and as a folder")
    return listed


class _BoundedTarInfo(tarfile.TarInfo):
    """Refuses an extended header (PAX, GNU long name) over 64 KiB before tarfile reads it into memory."""

    def _proc_member(self, tarfile_):  # type: ignore[no-untyped-def]
        extended = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                    tarfile.GNUTYPE_LONGLINK)  # fmt: skip
        if self.type in extended and self.size > 64 << 10:
            raise tarfile.HeaderError(f"an extended header of {self.size} bytes")
        return super()._proc_member(tarfile_)


def unpack(bundle: Path, dest: Path) -> BundleManifest:
    """Unpack ``bundle`` into ``dest``: regular files only, every one listed in the manifest with the
    listed hash, the root recomputed. A hostile archive (links, devices, paths outside, a file the
    manifest does not list or lists with another hash, more members than listed) is refused. The archive
    is read as a stream, one member at a time, so its size is bounded by what the manifest declares."""
    try:
        tar = tarfile.open(bundle, mode="r|gz", tarinfo=_BoundedTarInfo)
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"{bundle}: not a readable .tar.gz bundle ({exc})") from exc
    try:
        with tar:
            return _unpack(bundle, tar, dest)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise BundleError(f"{bundle}: not a readable .tar.gz bundle ({exc})") from exc
    except OSError as exc:
        raise BundleError(f"{bundle}: could not unpack into {dest}: {exc}") from exc


def _unpack(bundle: Path, tar: tarfile.TarFile, dest: Path) -> BundleManifest:
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME or not first.isfile():
        raise BundleError(f"{bundle}: the first member is not {MANIFEST_NAME}; not an evoaudit bundle")
    if first.size > _MANIFEST_LIMIT:
        raise BundleError(f"{bundle}: {MANIFEST_NAME} is {first.size} bytes; a manifest is far smaller")
    text = tar.extractfile(first).read()  # type: ignore[union-attr]
    try:
        version = json.loads(text).get("schema_version")
    except (ValueError, AttributeError):
        version = None
    if version != SCHEMA_VERSION:
        raise BundleError(
            f"{bundle}: {MANIFEST_NAME} has schema_version {version!r}; this evoaudit reads version "
            f"{SCHEMA_VERSION}: write the bundle again with this version (evoaudit bundle)"
        )
    try:
        manifest = BundleManifest.model_validate_json(text)
    except ValueError as exc:
        raise BundleError(f"{bundle}: {MANIFEST_NAME} is not a bundle manifest: {exc}") from exc
    listed = _check_manifest(bundle, manifest)
    dest.mkdir(parents=True, exist_ok=True)
    need, free = sum(e.bytes for e in manifest.entries), shutil.disk_usage(dest).free
    if need > free // 2:  # what the manifest declares, against the disk: a small archive can unpack large
        raise BundleError(f"{bundle}: declares {need} bytes; {dest} has {free} free; not unpacked")
    seen: set[str] = set()
    while (m := tar.next()) is not None:
        if len(seen) >= len(listed):
            raise BundleError(f"{bundle}: more members than {MANIFEST_NAME} lists")
        if not m.isfile() or m.name not in listed or m.name in seen:
            raise BundleError(
                f"{bundle}: member {m.name!r} is not a regular file listed once in {MANIFEST_NAME}"
            )
        entry = listed[m.name]
        if m.size != entry.bytes:
            raise BundleError(f"{bundle}: {m.name} has {m.size} bytes, {MANIFEST_NAME} says {entry.bytes}")
        target = dest / m.name
        target.parent.mkdir(parents=True, exist_ok=True)
        # Streamed and hashed on the way: a member is never held in memory whole.
        h, src = hashlib.sha256(), tar.extractfile(m)
        with open(target, "xb") as fh:
            for chunk in iter(functools.partial(src.read, 1 << 20), b""):  # type: ignore[union-attr]
                h.update(chunk)
                fh.write(chunk)
        if h.hexdigest() != entry.sha256:
            target.unlink()
            raise BundleError(f"tamper evidence: {m.name} in {bundle} does not have its listed sha256")
        # The root covers content_sha256: it must be what these bytes give, or the root vouches for nothing.
        rel = _under(m.name, manifest.results_dir) or ""
        content = _content(target.read_bytes(), rel) if _matches(rel, _TIMED) else (entry.sha256, [])
        if content != (entry.content_sha256, entry.timing_keys):
            raise BundleError(f"tamper evidence: {m.name}'s content_sha256 in {MANIFEST_NAME} is not its own")
        seen.add(m.name)
    if missing := sorted(set(listed) - seen):
        raise BundleError(
            f"{bundle}: {len(missing)} listed file(s) are not in the archive, e.g. {missing[0]}"
        )
    return manifest


def _targets(manifest: BundleManifest, derived: list[str]) -> list[str]:
    """What the rebuild asks Snakemake for: the reports the bundle holds (rule names, without wildcards),
    and each ablation table; the replay reports follow as their inputs."""
    rels = {_under(p, manifest.results_dir) for p in derived}
    targets = []
    if RELATIVE.report("report.md") in rels:
        targets.append("report")
    if RELATIVE.apex_report("tables", "apex_main.csv") in rels:
        targets.append("apex_report")
    targets += [
        f"{manifest.results_dir}/{r}"
        for r in sorted(rels)
        if fnmatch.fnmatchcase(r, RELATIVE.apex_report("ablations", "*.csv"))
        or r == RELATIVE.apex_report("defenses", "defense.csv")
    ]
    return targets


def reproduce(
    bundle: Path, workdir: Path | None, snakefile: Path, cores: int, out: Path | None = None
) -> ReproduceReport:
    """Re-derive the bundle's derived files from its records with this checkout's workflow; compare bytes.

    Long on purpose: one sequence in one scratch directory (unpack, rerun, compare), whose steps share it."""
    snakefile = snakefile.resolve()
    if not snakefile.is_file():
        raise BundleError(f"{snakefile}: no Snakefile; run reproduce from a checkout or pass --snakefile")
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="evoaudit-reproduce-"))
    elif workdir.exists() and any(workdir.iterdir()):
        raise BundleError(f"{workdir}: not empty; reproduce unpacks into a new or empty directory")
    workdir = workdir.resolve()
    staged = workdir / ".bundle"
    try:
        manifest = unpack(bundle, staged)
    except BundleError:
        shutil.rmtree(staged, ignore_errors=True)  # nothing of a refused bundle stays
        raise
    results = workdir / manifest.results_dir
    # Roles by this checkout's rule, never the manifest's word: a derived file is never placed, only rebuilt.
    derived: dict[str, BundleEntry] = {}
    for e in manifest.entries:
        rel = _under(e.path, manifest.results_dir)
        if rel is not None and _role(rel) == "derived":
            derived[e.path] = e
        elif not e.path.startswith("cache/"):
            target = workdir / e.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(staged / e.path, target)
    if not derived:
        raise BundleError(f"{bundle}: holds no replay report or report; there is nothing to reproduce")
    config = workdir / "config" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results / "config" / "config.json", config)  # JSON is YAML
    bundled = load(config)  # one this checkout cannot read stops here, naming the field
    if PurePosixPath(bundled.results_dir.rstrip("/")).as_posix() != manifest.results_dir:
        raise BundleError(
            f"{bundle}: its config's results_dir is not the manifest's {manifest.results_dir!r}"
        )
    for f in workdir.rglob("*"):
        if f.is_file() and staged not in f.parents:
            os.utime(f, (_MTIME, _MTIME))
    command = [
        sys.executable, "-P", "-m", "snakemake",
        "--snakefile", str(snakefile),
        "--directory", str(workdir),
        "--configfile", str(config),
        "--workflow-profile", "none",
        "--cores", str(cores),
        "--rerun-triggers", "mtime",
        "--allowed-rules", *DERIVING_RULES,
        "--", *_targets(manifest, list(derived)),
    ]  # fmt: skip
    # Set for the whole rebuild: every backend refuses to start and the pre-flight asks no server. No
    # Python process of it puts the work directory (the bundle's files) on its import path.
    env = dict(os.environ, **{NO_MODEL_CALLS_ENV: "1", "PYTHONSAFEPATH": "1"})
    env.pop("PYTHONPATH", None)
    run = subprocess.run(command, cwd=snakefile.parent, env=env, capture_output=True, text=True)
    (workdir / "reproduce.snakemake.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-25:])
        raise BundleError(
            f"reproduce: Snakemake failed (exit {run.returncode}); the whole output is in "
            f"{workdir / 'reproduce.snakemake.log'}. Its last lines:\n{tail}"
        )
    checks = []
    for path, e in sorted(derived.items()):
        f = workdir / path
        # Only a file this rebuild wrote counts: nothing derived was unpacked, and every unpacked file
        # carries the bundle's one modification time.
        got = sha256_file(f) if f.is_file() and f.stat().st_mtime != _MTIME else None
        status = "missing" if got is None else "identical" if got == e.sha256 else "differs"
        checks.append(FileCheck(path=path, status=status, bundle_sha256=e.sha256, rederived_sha256=got))
    for f in sorted(results.rglob("*")):
        rel = f.relative_to(results).as_posix()
        name = f"{manifest.results_dir}/{rel}"
        if f.is_file() and _role(rel) == "derived" and name not in derived:
            checks.append(
                FileCheck(path=name, status="extra", bundle_sha256=None, rederived_sha256=sha256_file(f))
            )
    count = {s: sum(c.status == s for c in checks) for s in ("identical", "differs", "missing", "extra")}
    report = ReproduceReport(
        bundle=str(bundle),
        root=manifest.root,
        workdir=str(workdir),
        command=command,
        bundle_code=manifest.code,
        code=code_revision(snakefile.parent),
        files=checks,
        identical=count["identical"],
        differing=count["differs"],
        missing=count["missing"],
        extra=count["extra"],
    )
    target = out or workdir / "reproduce.json"
    atomic.write_text(target, report.model_dump_json(indent=2) + "\n")
    return report
