"""The results layout: where every stage writes under ``results_dir``, spelled once.

The workflow's rules reach it through ``workflow/rules/common.smk`` (``LAYOUT`` and its ``get_*`` helpers),
Python code through a ``Layout`` over its results directory. Every method returns a string path (``root``
joined with ``/``, nothing normalised, so a rule's output is exactly what it was), and takes any string for
a key: a Snakemake wildcard (``"{lineage}"``) or a glob (``"*"``) works as well as a value. ``RELATIVE``
spells the same paths relative to a results directory (for globs and manifests).

Branches: a defended run lives under ``defense/<defense>/``, a later evolution round under
``rounds/<r>/`` (r >= 2), an APEX-Harm ablation arm under ``apex/ablations/<name>/``; the protocol's own
run at the top. Kept free of imports beyond the standard library: the workflow reads it while parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Directory names at the top of a results directory.
SUITE, SUITES, ACQUIRE, ARTIFACTS, FREEZE, EVALUATE, REPLAY = (
    "suite",
    "suites",
    "acquire",
    "artifacts",
    "freeze",
    "evaluate",
    "replay",
)
VERIFY, TRANSFER, REPORT, EXPORT, LOGS, BENCHMARKS, APEX = (
    "verify",
    "transfer",
    "report",
    "export",
    "logs",
    "benchmarks",
    "apex",
)
DEFENSE, ROUNDS, ABLATIONS, POISONING = "defense", "rounds", "ablations", "poisoning"


@dataclass(frozen=True)
class Layout:
    """The results layout under ``root`` (a results directory; ``""``: paths relative to one)."""

    #: The results directory, as configured (``results_dir`` without a trailing ``/``).
    root: str
    #: APEX-Harm's worlds and attack sets (``suite.apex.out``; by default ``<root>/suite/apex``).
    worlds: str = ""

    @classmethod
    def at(cls, results_dir: str | Path, worlds: str | Path | None = None) -> Layout:
        """The layout under ``results_dir`` (a trailing ``/`` dropped); ``worlds``: ``suite.apex.out``."""
        root = str(results_dir).rstrip("/")
        return cls(root, str(worlds).rstrip("/") if worlds is not None else cls(root).suite(APEX))

    @classmethod
    def of(cls, cfg) -> Layout:
        """The layout of a configuration (its ``results_dir`` and ``suite.apex.out``)."""
        return cls.at(cfg.results_dir, cfg.suite.apex.out)

    def _at(self, *parts: object) -> str:
        rel = "/".join(str(p) for p in parts)
        return f"{self.root}/{rel}" if self.root else rel

    @staticmethod
    def _branch(defense: str | None = None, round: object | None = None) -> tuple[str, ...]:
        if defense is not None and round is not None:
            raise ValueError("a path is defended or of a later round, not both")
        if defense is not None:
            return (DEFENSE, defense)
        return (ROUNDS, str(round)) if round is not None else ()

    # -- the run's configuration, logs and timings --
    def resolved_config(self) -> str:
        """The resolved configuration (rule resolved_config)."""
        return self._at("config", "config.json")

    def log(self, key: str) -> str:
        """A job's log: ``logs/<key>.log``."""
        return self._at(LOGS, f"{key}.log")

    def benchmark(self, key: str) -> str:
        """A job's timing: ``benchmarks/<key>.tsv``."""
        return self._at(BENCHMARKS, f"{key}.tsv")

    def logs_dir(self) -> str:
        return self._at(LOGS)

    # -- suite stage --
    def suite(self, name: str) -> str:
        """A file of the suite stage (``suite/<name>``: checker audit, instance tables, the spec)."""
        return self._at(SUITE, name)

    def extra_suite(self, xsuite: str, name: str) -> str:
        """A further suite's checker audit file (``suites/<xsuite>/<name>``)."""
        return self._at(SUITES, xsuite, name)

    # -- acquisition and evolution --
    def acquire(self, lineage: str, name: str, round: object | None = None, method: str | None = None) -> str:
        """An acquisition file of ``lineage`` (``rollouts.jsonl``, ``record.json``); a later round's is per
        method, under ``rounds/<r>/``."""
        if round is None:
            return self._at(ACQUIRE, lineage, name)
        return self._at(ROUNDS, round, ACQUIRE, lineage, method, name)

    def screened(self, lineage: str, name: str) -> str:
        """A write screen's output of ``lineage`` (``acquire/<lineage>/screened/``: the kept
        ``rollouts.jsonl`` and the screen's ``record.json``; only with ``write_defenses`` on)."""
        return self._at(ACQUIRE, lineage, "screened", name)

    def artifact(self, lineage: str, name: str, round: object | None = None) -> str:
        """An artifact's directory (round 1 or None: the protocol's own ``artifacts/``)."""
        branch = () if round is None or str(round) == "1" else (ROUNDS, str(round))
        return self._at(*branch, ARTIFACTS, lineage, name)

    def artifact_meta(self, lineage: str, name: str, round: object | None = None) -> str:
        return f"{self.artifact(lineage, name, round)}/meta.json"

    # -- seal --
    def freeze(self, name: str, lineage: str | None = None) -> str:
        """A seal file: ``freeze/[<lineage>/]<name>`` (``manifest.json``, ``unseal.json``, logs)."""
        return self._at(FREEZE, name) if lineage is None else self._at(FREEZE, lineage, name)

    # -- evaluation, replay, verification, transfer --
    def evaluate_root(self, defense: str | None = None, round: object | None = None) -> str:
        """The evaluation shards' directory of the run, a defence's or a later round's."""
        return self._at(*self._branch(defense, round), EVALUATE)

    def evaluate_shard(
        self, lineage: str, condition: str, arm: str, shard: object, defense: str | None = None, round=None
    ) -> str:
        return self._at(
            *self._branch(defense, round), EVALUATE, lineage, condition, arm, f"shard{shard}.jsonl"
        )

    def replay_root(self, defense: str | None = None, round: object | None = None) -> str:
        """The replay reports' directory of the run, a defence's or a later round's."""
        return self._at(*self._branch(defense, round), REPLAY)

    def replay_report(
        self, lineage: str, condition: str, arm: str, shard: object, defense: str | None = None, round=None
    ) -> str:
        return f"{self.replay_root(defense, round)}/{lineage}/{condition}/{arm}/shard{shard}.json"

    @staticmethod
    def replay_of(shard: str, runs: str = f"/{EVALUATE}/") -> str:
        """The replay report of a shard path: its last ``runs`` directory becomes ``replay``, ``.jsonl``
        ``.json``."""
        head, sep, tail = shard.rpartition(runs)
        if not sep or not tail.endswith(".jsonl"):
            raise ValueError(f"{shard}: not a shard under a {runs.strip('/')}/ directory")
        return f"{head}/{REPLAY}/{tail.removesuffix('.jsonl')}.json"

    def verify_report(self) -> str:
        return self._at(VERIFY, "verify.json")

    def transfer(self, name: str) -> str:
        """A file of the cross-executor check (``transfer/<name>``)."""
        return self._at(TRANSFER, name)

    def transfer_shard(self, lineage: str, condition: str, arm: str = "attacked", shard: object = 0) -> str:
        return self._at(TRANSFER, EVALUATE, lineage, condition, arm, f"shard{shard}.jsonl")

    # -- the poisoning extension (docs/poisoning.md) --
    def poisoning(self, kind: str, lineage: str) -> str:
        """A poisoned lineage's record: ``poisoning/<kind>/<lineage>.json`` (kind ``contamination``,
        ``replay`` or ``persistence``)."""
        return self._at(POISONING, kind, f"{lineage}.json")

    # -- report, export, index --
    def report(self, *parts: str) -> str:
        """A file of the audit report (``report/...``)."""
        return self._at(REPORT, *parts)

    def report_table(self, name: str, ext: str = "csv") -> str:
        return self._at(REPORT, "tables", f"{name}.{ext}")

    def export(self, name: str) -> str:
        return self._at(EXPORT, name)

    def top(self, rel: str) -> str:
        """A file at a path relative to the results directory named elsewhere (the run index's pages)."""
        return self._at(rel)

    # -- APEX-Harm (arm: '' for the main run, 'ablations/<name>/' for an ablated arm) --
    @staticmethod
    def ablation_arm(name: str) -> str:
        """The ``arm`` of ablation ``name``: the prefix of its directories under ``apex/``."""
        return f"{ABLATIONS}/{name}/"

    @classmethod
    def apex_replay_of(cls, shard: str) -> str:
        """The replay report of an APEX-Harm shard path (``runs`` becomes ``replay``)."""
        return cls.replay_of(shard, "/runs/")

    def apex(self, *parts: str) -> str:
        """APEX-Harm's directory (``apex/...``)."""
        return self._at(APEX, *parts)

    def apex_runs(self, arm: str = "", defense: str | None = None) -> str:
        return self._apex_branch(arm, defense, "runs")

    def apex_shard(
        self, model: str, part: str, shard: object, arm: str = "", defense: str | None = None
    ) -> str:
        """One APEX-Harm shard; ``part`` is ``benign`` or ``attacked/<category>``."""
        return f"{self.apex_runs(arm, defense)}/{model}/{part}/shard{shard}.jsonl"

    def apex_replay(
        self, model: str, part: str, shard: object, arm: str = "", defense: str | None = None
    ) -> str:
        return f"{self._apex_branch(arm, defense, REPLAY)}/{model}/{part}/shard{shard}.json"

    def apex_judge(self, model: str, arm: str = "", defense: str | None = None) -> str:
        return f"{self._apex_branch(arm, defense, 'judge')}/{model}.json"

    def apex_world(self, name: str) -> str:
        """A file of APEX-Harm's built worlds (``suite.apex.out``: the manifest, the spec)."""
        return f"{self.worlds}/{name}"

    def apex_attacks(self, arm: str = "") -> str:
        """The frozen attack set of an arm (the main one, or an ablated arm's own beside it)."""
        return f"{self.worlds}/{arm}attacks.json"

    def apex_instances(self, arm: str = "") -> str:
        return self._at(APEX, f"{arm}instances.parquet")

    def apex_report(self, *parts: str) -> str:
        return self._at(APEX, REPORT, *parts)

    def _apex_branch(self, arm: str, defense: str | None, leaf: str) -> str:
        if defense is not None:
            return self._at(APEX, DEFENSE, defense, leaf)
        return self._at(APEX, f"{arm}{leaf}")


#: The layout relative to a results directory (globs, manifests).
RELATIVE = Layout("")
