"""The Throughput page's model: which commit another machine's curves come from, and the speed-up tables.
Pure pandas over ``dashboard.suites``' frames (``dashboard/views/throughput.py`` is the page)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dashboard import fmt


def overlay_commit(sha: str, their_shas: Sequence[str]) -> str:
    """The other machine's commit to overlay: ``sha`` where it measured it, else its newest (the last)."""
    return sha if sha in set(their_shas) else str(their_shas[-1])


def speedup_rows(speedups: pd.DataFrame, line_param: str) -> pd.DataFrame:
    """``suites.speedup_table`` for display: one column per concurrency, as ``35.0x``, ``8.23x``."""
    shown = speedups.drop(columns="filter").rename(columns={"line": line_param})
    for c in shown.columns:
        if c.startswith("c="):
            shown[c] = shown[c].map(fmt.fmt_speedup)
    return shown


def baseline_rows(ratios: pd.DataFrame, line_param: str) -> pd.DataFrame:
    """``suites.baseline_ratios`` for display: tokens/s at both commits and the speed-up."""
    return pd.DataFrame({
        line_param: ratios["line"],
        "concurrency": ratios["concurrency"].astype(int),
        "tokens/s": ratios["tokens_per_s"].map(lambda v: fmt.fmt_value(v, "tokens/s")),
        "baseline tokens/s": ratios["baseline"].map(lambda v: fmt.fmt_value(v, "tokens/s")),
        "speed-up": ratios["speedup"].map(fmt.fmt_speedup),
    })
