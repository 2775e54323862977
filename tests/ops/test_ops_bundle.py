"""`evoaudit bundle` / `reproduce`: a root over content with timing beside it, an unpacking that refuses a
hostile archive, and the interlock that keeps every model out of a reproduction."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile

import pytest

from evoaudit import config as config_mod
from evoaudit.models.factory import make_backend
from evoaudit.models.preflight import check
from evoaudit.offline import NO_MODEL_CALLS_ENV, ModelCallRefused
from evoaudit.ops.bundle import MANIFEST_NAME, BundleError, BundleManifest, unpack, write_bundle


def _results(root, wall: float, when: str, answer: str = "ok"):
    """A small results directory: a shard with its timing file, an unseal event, a log, a benchmark, a
    replay report and a table."""
    files = {
        "config/config.json": "{}\n",
        "evaluate/L1/static/benign/shard0.jsonl": json.dumps({"rollout_id": "r1", "final_output": answer})
        + "\n",
        "evaluate/L1/static/benign/shard0.timing.tsv": f"rollout_id\twall_s\nr1\t{wall!r}\n",
        "freeze/L1/unseal.json": json.dumps({"lineage": "L1", "unsealed_at": when}, indent=2) + "\n",
        "freeze/unseal_log.jsonl": json.dumps({"key": "global", "time": when}) + "\n",
        "logs/evaluate.log": f"{when} started\n",
        "benchmarks/evaluate.tsv": f"s\n{wall}\n",
        "replay/L1/static/benign/shard0.json": '{"replayed": 1}\n',
        "report/tables/main.csv": "condition,utility\nstatic,1.0\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _bundle(tmp_path, name, **kw):
    results = _results(tmp_path / name / "results", **kw)
    return write_bundle(config_mod.from_dict({}), results, tmp_path / f"{name}.tar.gz")


def test_two_runs_that_differ_only_in_timing_have_one_root(tmp_path):
    a = _bundle(tmp_path, "a", wall=1.25, when="2026-01-01T00:00:00+00:00")
    b = _bundle(tmp_path, "b", wall=9.5, when="2026-06-30T12:00:00+00:00")
    assert a.root == b.root
    assert (tmp_path / "a.tar.gz").read_bytes() != (tmp_path / "b.tar.gz").read_bytes()  # timing is carried
    c = _bundle(tmp_path, "c", wall=1.25, when="2026-01-01T00:00:00+00:00", answer="changed")
    assert c.root != a.root


def test_timing_is_listed_beside_the_root_and_logs_are_left_out(tmp_path):
    m = _bundle(tmp_path, "a", wall=1.0, when="2026-01-01T00:00:00+00:00")
    by = {e.path: e for e in m.entries}
    assert by["results/evaluate/L1/static/benign/shard0.timing.tsv"].role == "beside"
    assert by["results/benchmarks/evaluate.tsv"].role == "beside"
    assert by["results/freeze/L1/unseal.json"].timing_keys == ["unsealed_at"]
    assert by["results/freeze/unseal_log.jsonl"].timing_keys == ["time"]
    assert by["results/freeze/L1/unseal.json"].content_sha256 != by["results/freeze/L1/unseal.json"].sha256
    assert by["results/report/tables/main.csv"].role == "derived"
    assert by["results/replay/L1/static/benign/shard0.json"].role == "derived"
    assert by["results/evaluate/L1/static/benign/shard0.jsonl"].role == "record"
    assert not any(p.startswith("results/logs/") for p in by)


def test_an_unpacked_bundle_matches_its_manifest(tmp_path):
    m = _bundle(tmp_path, "a", wall=1.0, when="t")
    got = unpack(tmp_path / "a.tar.gz", tmp_path / "out")
    assert got.root == m.root
    for e in m.entries:
        assert hashlib.sha256((tmp_path / "out" / e.path).read_bytes()).hexdigest() == e.sha256


def _archive(path, members):
    """A .tar.gz from (TarInfo, bytes or None) pairs."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(raw.getvalue())


def _file(name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _manifest_for(files: dict[str, bytes], dirs=("cache", "results")) -> bytes:
    from evoaudit.ops.bundle import _entry, root_of

    entries = [_entry(n, d, "record") for n, d in sorted(files.items())]
    m = BundleManifest(
        root=root_of(entries), results_dir="results", dirs=list(dirs), entries=entries, code={}
    )
    return m.model_dump_json().encode()


def _link(name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


CONFIG = "results/config/config.json"
BASE = {CONFIG: b"{}\n", "results/a.json": b"{}\n"}


def _members(files, manifest=None, dirs=("cache", "results")):
    return [_file(MANIFEST_NAME, manifest or _manifest_for(files, dirs))] + [
        _file(n, d) for n, d in files.items()
    ]


def _hostile(case, tmp_path):
    """(members, what the refusal names) of one hostile archive, each built on the valid BASE."""
    m = _members(BASE)
    if case == "symlink":
        return m[:1] + [_link("results/b", "/etc/passwd")] + m[1:], "not a regular file listed"
    if case == "hardlink":
        return m[:1] + [_link("results/b", "results/a.json", tarfile.LNKTYPE)] + m[1:], "not a regular file"
    if case == "dotdot":
        return m[:1] + [_file("results/../../escaped", b"x")] + m[1:], "not a regular file listed"
    if case == "absolute":
        return m[:1] + [_file(str(tmp_path / "escaped"), b"x")] + m[1:], "not a regular file listed"
    if case == "outside_results":
        return m[:1] + [_file("Snakefile", b"x")] + m[1:], "not a regular file listed"
    if case == "unlisted":
        return m[:1] + [_file("results/extra.json", b"{}")] + m[1:], "not a regular file listed"
    if case == "more_members_than_listed":
        return m + [_file("results/a.json", b"{}\n")], "more members than"
    if case == "wrong_hash":
        return m[:2] + [_file("results/a.json", b"[]\n")], "listed sha256"
    if case == "edited_root":
        data = json.loads(_manifest_for(BASE))
        data["root"] = "0" * 64
        return [_file(MANIFEST_NAME, json.dumps(data).encode())] + m[1:], "root does not match"
    if case == "no_manifest":
        return m[1:], "first member"
    if case == "missing_member":
        return m[:2], "not in the archive"
    if case == "no_config":
        files = {"results/a.json": b"{}\n"}
        return _members(files), "config/config.json"
    if case == "listed_twice":  # one path as a record and again as derived
        from evoaudit.ops.bundle import _entry, root_of

        entries = [_entry(CONFIG, b"{}\n", "record"), _entry("results/a.json", b"{}\n", "record"),
                   _entry("results/a.json", b"{}\n", "derived")]  # fmt: skip
        man = BundleManifest(
            root=root_of(entries), results_dir="results", dirs=["results"], entries=entries, code={}
        )
        return _members(BASE, man.model_dump_json().encode()), "twice"
    if case == "not_normalised":
        return _members(BASE | {"results/./b.json": b"{}\n"}), "not a path under"
    if case == "file_and_folder":
        return _members(BASE | {"results/a": b"x", "results/a/b/c": b"y"}), "as a file and as a folder"
    if case == "workflow_dir_declared":  # a manifest that claims the workflow's own folder for itself
        return _members(
            BASE | {"workflow/rules/x.smk": b"shell('id')\n"}, dirs=("results", "workflow")
        ), "workflow"
    if case == "results_dir_cache":
        data = json.loads(_manifest_for({"cache/config/config.json": b"{}\n"}, ("cache",)))
        data["results_dir"] = "cache"
        return [_file(MANIFEST_NAME, json.dumps(data).encode())], "results_dir"
    if case == "forged_content_hash":  # bytes as listed, but the root covers a content hash of other bytes
        from evoaudit.ops.bundle import _entry, root_of

        event = b'{"lineage": "L1", "unsealed_at": "t"}\n'
        files = BASE | {"results/freeze/L1/unseal.json": event}
        entries = [_entry(n, d, "record", n.removeprefix("results/")) for n, d in sorted(files.items())]
        entries[-1] = entries[-1].model_copy(update={"content_sha256": "0" * 64})
        man = BundleManifest(
            root=root_of(entries), results_dir="results", dirs=["results"], entries=entries, code={}
        )
        return _members(files, man.model_dump_json().encode()), "content_sha256"
    if case == "pax_bomb":
        big = tarfile.TarInfo("results/a.json")
        big.size, big.pax_headers = 3, {"comment": "x" * (200 << 10)}
        return m[:2] + [(big, b"{}\n")], "not a readable"  # m[1] is the config
    raise AssertionError(case)


HOSTILE = [
    "symlink", "hardlink", "dotdot", "absolute", "outside_results", "unlisted", "more_members_than_listed",
    "wrong_hash", "edited_root", "no_manifest", "missing_member", "no_config", "listed_twice",
    "not_normalised", "file_and_folder", "workflow_dir_declared", "results_dir_cache", "forged_content_hash",
    "pax_bomb",
]  # fmt: skip


def test_the_archive_the_hostile_cases_start_from_unpacks(tmp_path):
    _archive(tmp_path / "ok.tar.gz", _members(BASE))
    unpack(tmp_path / "ok.tar.gz", tmp_path / "out")
    assert (tmp_path / "out" / "results" / "a.json").read_bytes() == b"{}\n"


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_archive_is_refused_for_its_reason_and_writes_nothing_outside(tmp_path, case):
    members, reason = _hostile(case, tmp_path)
    _archive(tmp_path / "bad.tar.gz", members)
    with pytest.raises(BundleError, match=re.escape(reason)):
        unpack(tmp_path / "bad.tar.gz", tmp_path / "out")
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()
    assert not (tmp_path / "out" / "results" / "b").exists() and not (tmp_path / "out" / "workflow").exists()


def test_a_file_that_is_not_a_bundle_is_refused(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(BundleError, match="not a readable"):
        unpack(tmp_path / "x.tar.gz", tmp_path / "out")


def test_no_backend_starts_while_model_calls_are_refused(monkeypatch):
    cfg = config_mod.from_dict({})
    monkeypatch.setenv(NO_MODEL_CALLS_ENV, "1")
    with pytest.raises(ModelCallRefused, match="simulator"):
        make_backend(cfg, cfg.executor, [])  # the simulator is a model here too
    openai = config_mod.from_dict(
        {"executor": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    )
    with pytest.raises(ModelCallRefused, match="optimizer"):
        make_backend(openai, openai.executor, [], role="optimizer")
    assert check(openai) == {}  # the pre-flight asks no server (port 9 would refuse it)
    from evoaudit.suite.apex.attacks.attacker import Attacker

    with pytest.raises(ModelCallRefused, match="attacker"):
        Attacker(lambda msgs: "", "sim")
    monkeypatch.delenv(NO_MODEL_CALLS_ENV)
    assert make_backend(cfg, cfg.executor, []) is not None


def test_the_resolved_config_a_run_records_loads_back_to_the_same_config(tmp_path):
    # results/config/config.json is what a reproduction runs under: the APEX settings, left out of the
    # Banking hashes, must be in it too.
    cfg = config_mod.from_dict({"apex": {"enabled": False}, "sim": {"apex": {"competence": 0.3}}})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.full_dump()))
    back = config_mod.load(path)
    assert back.full_dump() == cfg.full_dump() and back.apex.enabled is False
    assert back.sim.apex.competence == 0.3


def test_a_bundle_mirrors_the_runs_own_results_dir(tmp_path):
    results = _results(tmp_path / "results-cues-off", wall=1.0, when="t")
    cfg = config_mod.from_dict({"results_dir": "results-cues-off"})
    m = write_bundle(cfg, results, tmp_path / "b.tar.gz")
    assert m.results_dir == "results-cues-off" and "results-cues-off" in m.dirs
    assert all(e.path.startswith(("results-cues-off/", "cache/")) for e in m.entries)
    unpack(tmp_path / "b.tar.gz", tmp_path / "out")
    assert (tmp_path / "out" / "results-cues-off" / "report" / "tables" / "main.csv").exists()
