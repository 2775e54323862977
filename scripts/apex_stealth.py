"""Stage script (rule apex_stealth): whether the frozen attack set's injected text stands out."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from pathlib import Path

from evoaudit.config import from_dict
from evoaudit.joblog import job_log
from evoaudit.provenance import write_provenance
from evoaudit.suite.apex.stage import attack_set_stealth

with job_log(snakemake.log[0]):
    cfg = from_dict(snakemake.config, "config (config/config.yaml and --config overrides)")
    out = Path(snakemake.output.stealth)
    record = attack_set_stealth(cfg, Path(snakemake.input.attacks), Path(snakemake.input.spec))
    record.write(out)
    write_provenance(out, cfg, "apex_stealth", attack_set_sha256=record.attack_set_sha256)
