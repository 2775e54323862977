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
