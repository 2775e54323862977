"""Stage script (rule resolved_config): the run's resolved configuration, written to
``<results_dir>/config/config.json``."""
# ruff: noqa: F821  (Snakemake's `script:` directive defines `snakemake`)

from evoaudit import atomic

atomic.write_text(snakemake.output[0], snakemake.params.text)
