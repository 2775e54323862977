"""Where every report table file and figure is written, so that each carries the simulator notice of a
simulator run (``report.simlabel``): a CSV or parquet table as a ``simulator_notice`` column (and, in
parquet, the file metadata key the rollout table uses too), a PNG or SVG figure as a stamp above the plot."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from evoaudit.report.rollout_table import NOTICE_KEY

#: The column a simulator run's tables carry, holding the notice on every row.
NOTICE_COLUMN = "simulator_notice"
#: The stamp a simulator run's figures carry (the full notice is on every page the figure is shown on).
FIGURE_STAMP = "SIMULATOR RUN: a mechanism check of the audit, not a finding about any model"


def write_table(
    frame: pd.DataFrame, csv_path: Path, notice: str | None, float_format: str | None = None
) -> None:
    """``frame`` as ``csv_path`` and the parquet file beside it, with the notice where there is one."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    out = frame.reset_index(drop=True)
    if notice:
        out = out.assign(**{NOTICE_COLUMN: notice})
    out.to_csv(csv_path, index=False, float_format=float_format, lineterminator="\n")
    table = pa.Table.from_pandas(out, preserve_index=False)
    if notice:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), NOTICE_KEY: notice.encode()})
    pq.write_table(table, csv_path.with_suffix(".parquet"))


def save_figure(fig, out_dir: Path, name: str, notice: str | None) -> list[Path]:
    """The figure as ``<name>.png`` and ``<name>.svg``, stamped on a simulator run; closes it."""
    import matplotlib.pyplot as plt

    if notice:
        fig.suptitle(FIGURE_STAMP, color="firebrick", fontsize=8, fontweight="bold", y=1.02)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    # No timestamps or software versions: the same tables give the same files.
    fig.savefig(png, dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return [png, svg]
