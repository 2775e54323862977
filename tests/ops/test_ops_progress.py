"""Progress of a run, summed over the job logs that the rollout runner writes."""

from __future__ import annotations

import io
import logging
from types import SimpleNamespace

from evoaudit.evaluate.runner import Progress
from evoaudit.ops import progress


def _runner_lines(label: str, total: int, done: int, failures: int) -> list[str]:
    """What the evaluator's own Progress logs (so a change of its format fails here, not in production)."""
    records: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Grab()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("evoaudit.evaluate.runner")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        p = Progress(total, 0, label, every_s=0.0)
        for i in range(done):
            infra = "retries_exhausted" if i < failures else None
            p.tick(SimpleNamespace(outcome=SimpleNamespace(infra_failure=infra)))
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    return records


def test_latest_progress_line_of_each_job_log_is_summed(tmp_path):
    logs = tmp_path / "results" / "logs" / "evaluate"
    logs.mkdir(parents=True)
    a = _runner_lines("results/evaluate/L1/static/attacked/shard0.jsonl", 10, 4, 1)
    b = _runner_lines("results/evaluate/L1/static/benign/shard0.jsonl", 6, 6, 0)
    assert a and b
    (logs / "a.log").write_text("starting\n" + "\n".join(a) + "\nTraceback (most recent call last):\n")
    (logs / "b.log").write_text("\n".join(b) + "\n")
    (logs / "c.log").write_text("no progress yet\n")
    jobs = progress.collect(tmp_path / "results")
    assert sorted((j.done, j.total, j.failures) for j in jobs) == [(4, 10, 1), (6, 6, 0)]
    s = progress.summary(jobs)
    assert (s["done"], s["total"], s["running"], s["failures"]) == (10, 16, 1, 1)
    out = io.StringIO()
    assert progress.watch(tmp_path / "results", follow=True, every_s=0, out=out, max_updates=2) == s
    assert out.getvalue().count("10/16 rollouts in 2 jobs (1 running)") == 2
    assert "[" + "#" * 18 + "-" * 12 + "]" in out.getvalue()


def test_evoaudit_progress_is_a_subcommand_and_the_module_still_runs(tmp_path, capsys):
    from evoaudit import cli

    logs = tmp_path / "results" / "logs"
    logs.mkdir(parents=True)
    line = "L1/static/benign/shard0: 3/4 rollouts, 1.0/s, ETA 1s, infrastructure failures 0\n"
    (logs / "a.log").write_text(line)
    assert cli.main(["progress", "--results", str(tmp_path / "results")]) == 0
    via_cli = capsys.readouterr().out
    assert progress.main(["--results", str(tmp_path / "results")]) == 0
    assert capsys.readouterr().out == via_cli and "3/4" in via_cli


def test_the_success_message_names_the_reports_the_run_wrote(tmp_path):
    results = tmp_path / "results"
    for rel in (
        "report/html/index.html",
        "report/report.md",
        "apex/report/html/index.html",
        "apex/report/ablations/timer.html",
    ):
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / rel).write_text("x")
    msg = progress.success_message(results, True, ("timer",))
    for rel in (
        "report/html/index.html",
        "report/report.md",
        "apex/report/html/index.html",
        "apex/report/ablations/timer.html",
    ):
        assert f"{results.as_posix()}/{rel}" in msg, msg
    assert "apex" not in progress.success_message(results, False).replace("snakemake --report", "")
    assert "no report under" in progress.success_message(tmp_path / "empty")


def test_a_successful_run_prints_where_the_reports_are(tmp_path):
    from conftest import copy_workflow, snakemake

    work = copy_workflow(tmp_path)
    (work / "results" / "report").mkdir(parents=True)
    (work / "results" / "report" / "report.md").write_text("# report\n")
    proc = snakemake(work, "results/suite/checker_audit.csv")
    assert "evoaudit: the run finished; the reports are:\n  results/report/report.md" in proc.stderr, (
        proc.stderr[-2000:]
    )
