"""Resume and incremental reruns on the real Snakemake scheduler (small offline audits)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import copy_workflow, snakemake, write_config

from evoaudit.jsonl import read_timing

# Small but complete: every stage runs; the checks that are not about resuming are off to save time.
SMALL = {
    "lineages": ["L1"],
    "methods": ["static"],
    "conditions": ["static"],
    "transfer": {"enabled": False},
    "seal": {"verify_sample": 0},
}


def _files(root: Path, under: str) -> dict[str, int]:
    """Path -> mtime_ns of every file below ``root/under``: a rerun job rewrites its outputs."""
    base = root / under
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()}


# Provenance records the freeze manifest's root, which hashes the acquisition record, whose rollouts carry
# their wall times: it differs between any two runs, interrupted or not, so it is not compared.
NOT_COMPARED = {"provenance.json"}


def _tables(root: Path) -> dict[str, bytes]:
    tables = root / "results" / "report" / "tables"
    out = {
        str(p.relative_to(tables)): p.read_bytes()
        for p in sorted(tables.rglob("*"))
        if p.is_file() and p.name not in NOT_COMPARED
    }
    assert out, f"no tables under {tables}"
    return out


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.slow
def test_kill9_of_an_evaluation_resumes_without_redoing_rollouts_and_tables_match(tmp_path):
    # All nine goals make the attacked shard long enough (144 rollouts) to be caught mid-run.
    cfg = {**SMALL, "suite": {"goals": [f"injection_task_{i}" for i in range(9)]}}
    (tmp_path / "clean").mkdir()
    (tmp_path / "killed").mkdir()
    clean = copy_workflow(tmp_path / "clean", cfg)
    killed = copy_workflow(tmp_path / "killed", cfg)
    # The uninterrupted run goes side by side, so that both runs use the same code and config.
    clean_log = open(tmp_path / "clean.log", "w")  # closed in the finally below
    clean_run = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(clean)],
        cwd=clean,
        stdout=clean_log,
        stderr=subprocess.STDOUT,
    )
    try:
        _kill_and_resume(killed, clean_run)
    finally:
        if clean_run.poll() is None:
            clean_run.kill()
            clean_run.wait()
        clean_log.close()
    assert clean_run.returncode == 0, (tmp_path / "clean.log").read_text()[-3000:]
    assert _tables(killed) == _tables(clean)


def _kill_and_resume(killed: Path, clean_run: subprocess.Popen) -> None:
    """Kill -9 the attacked evaluation of ``killed`` once it has recorded rollouts, then rerun it."""
    shard = killed / "results/evaluate/L1/static/attacked/shard0.jsonl"
    partial = shard.with_name(shard.name + ".partial")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(killed)]
    proc = subprocess.Popen(cmd, cwd=killed, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = None
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if _lines(partial) >= 5:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    try:
                        opened = [f.path for f in child.open_files()]
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
                    # The stage script's own process: it holds its rule's log open while it runs.
                    if any(f.endswith("logs/evaluate/L1/static/attacked/shard0.log") for f in opened):
                        victim = child
                        break
                if victim is not None:
                    victim.kill()  # SIGKILL: no handler, no cleanup, a torn last line is possible
                    break
            time.sleep(0.01)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert victim is not None, f"the attacked evaluation was never caught running:\n{out[-3000:]}"
    assert proc.returncode != 0, "the interrupted run should fail"
    assert not shard.exists(), "a killed evaluation must not publish its shard"
    before = partial.read_bytes()
    survivors = [ln for ln in before.split(b"\n")[:-1] if ln.strip()]  # drop a torn tail
    assert 0 < len(survivors) < 144

    snakemake(killed)
    clean_run.wait(timeout=1200)
    # A rollout done again would have another wall time: the published timing file keeps the survivors'.
    timing = read_timing(shard)
    kept = {r["rollout_id"]: r["wall_s"] for r in map(json.loads, survivors)}
    redone = [rid for rid, wall in kept.items() if timing[rid]["wall_s"] != wall]
    assert not redone, f"{len(redone)} rollouts finished before the kill were redone: {redone[:3]}"
    published = {json.loads(line)["rollout_id"]: json.loads(line) for line in shard.read_text().splitlines()}
    for line in survivors:  # and the rest of each record is what was recorded before the kill
        record = json.loads(line)
        record.pop("wall_s")
        assert published[record["rollout_id"]] == record
    assert not partial.exists()


def _inject_acquisition_fault(root: Path, lineage: str) -> Path:
    # A directory where the acquisition's partial record must be: the job fails when it opens it.
    fault = root / f"results/acquire/{lineage}/rollouts.jsonl.partial"
    fault.mkdir(parents=True)
    return fault


@pytest.mark.slow
def test_failed_lineage_with_keep_going_others_finish_and_rerun_completes_only_it(tmp_path):
    # Lineage-scoped sealing lets a lineage be evaluated while another is still failing; under the
    # global scope no lineage may open before all are frozen, by design.
    cfg = {
        **SMALL,
        "lineages": ["L1", "L2"],
        "suite": {"goals": ["injection_task_0"]},
        "seal": {"verify_sample": 0, "seal_scope": "lineage"},
    }
    root = copy_workflow(tmp_path, cfg)
    fault = _inject_acquisition_fault(root, "L2")
    first = snakemake(root, "--keep-going", check=False)
    assert first.returncode != 0
    assert "acquire" in first.stdout + first.stderr
    for arm in ("benign", "attacked"):
        assert (root / f"results/evaluate/L1/static/{arm}/shard0.jsonl").exists(), first.stderr[-3000:]
        assert (root / f"results/replay/L1/static/{arm}/shard0.json").exists()
    assert not (root / "results/acquire/L2/rollouts.jsonl").exists()
    assert not (root / "results/report/tables/main.csv").exists()

    before = {
        **_files(root, "results/acquire/L1"),
        **_files(root, "results/artifacts/L1"),
        **_files(root, "results/evaluate/L1"),
        **_files(root, "results/replay/L1"),
        **_files(root, "results/suite"),
    }
    fault.rmdir()
    second = snakemake(root)
    after = {k: v for k, v in _files(root, "results").items() if k in before}
    redone = sorted(k for k in before if after.get(k) != before[k])
    assert not redone, f"the rerun redid work of the lineage that had finished: {redone}"
    for arm in ("benign", "attacked"):
        assert (root / f"results/evaluate/L2/static/{arm}/shard0.jsonl").exists()
    assert (root / "results/report/tables/main.csv").exists()
    assert "rule acquire" in second.stdout + second.stderr or "acquire" in second.stderr


@pytest.mark.slow
def test_adding_a_lineage_reruns_only_the_new_lineage_the_seal_chain_and_the_report(tmp_path):
    cfg = {
        **SMALL,
        "suite": {"goals": ["injection_task_0"]},
        "seal": {"verify_sample": 0, "unseal_new_root": "extend"},
    }
    root = copy_workflow(tmp_path, cfg)
    snakemake(root)
    existing = {
        **_files(root, "results/acquire/L1"),
        **_files(root, "results/artifacts/L1"),
        **_files(root, "results/evaluate/L1"),
        **_files(root, "results/replay/L1"),
        **_files(root, "results/suite"),
    }
    report_before = _files(root, "results/report")

    write_config(root, {**cfg, "lineages": ["L1", "L2"]})
    snakemake(root)
    now = _files(root, "results")
    redone = sorted(k for k in existing if now.get(k) != existing[k])
    assert not redone, f"adding lineage L2 redid existing work: {redone}"
    assert (root / "results/evaluate/L2/static/attacked/shard0.jsonl").exists()
    assert any(now.get(k) != v for k, v in report_before.items()), "the report must be rebuilt"
    # A no-op rerun afterwards schedules nothing at all.
    dry = snakemake(root, "--dry-run")
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_adding_a_condition_reruns_only_its_evaluations_and_the_report(tmp_path):
    # awm-adapted deploys the artifact awm-literal already uses: no new artifact, so nothing upstream
    # of evaluation (and no manifest) may change.
    cfg = {
        **SMALL,
        "methods": ["static", "awm"],
        "conditions": ["static", "awm-literal"],
        "suite": {"goals": ["injection_task_0"]},
    }
    root = copy_workflow(tmp_path, cfg)
    snakemake(root)
    existing = {
        k: v
        for k, v in _files(root, "results").items()
        if not k.startswith(("results/report", "results/logs/report", "results/benchmarks/report"))
    }
    report_before = _files(root, "results/report")
    replays = {p: p.read_bytes() for p in (root / "results/replay/L1").rglob("shard0.json")}

    write_config(root, {**cfg, "conditions": ["static", "awm-literal", "awm-adapted"]})
    snakemake(root)
    now = _files(root, "results")
    # Replay is one job per lineage and sends no model request: it runs again over every shard of L1 and
    # must report the existing shards byte for byte as before.
    replay = ("results/replay/L1/", "results/logs/replay/", "results/benchmarks/replay/")
    # The resolved config and the owner marker record the changed configuration (its hash), as they must.
    recorded = ("results/config", "results/.evoaudit-owner.json")
    kept = [k for k in existing if not k.startswith((*recorded, *replay))]
    redone = sorted(k for k in kept if now.get(k) != existing[k])
    assert not redone, f"adding condition awm-adapted redid existing work: {redone}"
    assert len(replays) == 4 and all(p.read_bytes() == text for p, text in replays.items())
    assert (root / "results/evaluate/L1/awm-adapted/attacked/shard0.jsonl").exists()
    assert any(now.get(k) != v for k, v in report_before.items()), "the report must be rebuilt"
