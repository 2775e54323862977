"""Stage script (rule apex_defense_table): APEX-Harm's defence table, each defence against the main run."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

import json
from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.provenance import write_provenance
from evoaudit.report.apex.defense import defense_table, judged_rollouts, write_table
from evoaudit.report.apex.report import sim_notice
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.suite.registry import get_suite, suite_defenses

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    policy = cfg.apex.failure_policy
    base = judged_rollouts(snakemake.input.base, snakemake.input.base_judged, policy, "undefended run")
    defended = {
        d: judged_rollouts(
            [p for p in snakemake.input.defended if f"/defense/{d}/" in p],
            [p for p in snakemake.input.judged if f"/defense/{d}/" in p],
            policy,
            f"defence {d}",
        )
        for d in suite_defenses("apex", cfg.defenses)
    }
    bs = cfg.report.bootstrap
    families = sorted({r.family for r in base})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    reps = [json.loads(Path(p).read_text()) for p in snakemake.input.replays]
    mismatched = [m if isinstance(m, int) else len(m) for m in (r["mismatched_rollouts"] for r in reps)]
    record = {
        "defenses": list(defended),
        "not_run_on_apex": {
            d: why for d, why in get_suite("apex").unsupported_defenses.items() if d in cfg.defenses
        },
        "defended_replay": {
            "replayed": sum(r["replayed"] for r in reps),
            "mismatched_rollouts": sum(mismatched),
        },
    }
    out = Path(snakemake.output.csv)
    write_table(defense_table(base, defended, boot), out, sim_notice(cfg), record)
    write_provenance(
        [out, out.with_suffix(".parquet"), out.with_suffix(".html")], cfg, "apex_defense_table", **record
    )
