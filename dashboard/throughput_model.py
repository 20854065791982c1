"""The Throughput page's model: the commit it opens on, which commit another machine's curves come from, and the
speed-up tables.
Pure pandas over ``dashboard.suites``' frames (``dashboard/views/throughput.py`` is the page)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dashboard import fmt
from dashboard.suites import SUITES, matches


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


def grid_points(recent: pd.DataFrame) -> pd.Series:
    """Points measured per commit (``commit_id`` -> count): values of the suites' timed benchmarks
    (``suites.SUITES``' ``time_bench``) among ``recent`` (``db.queries.recent_values``)."""
    if recent.empty:
        return pd.Series(dtype="int64")
    names = pd.Series(recent["benchmark"].unique())
    timed = [suite.time_bench for suite in SUITES]
    hits = set(names[[any(matches(str(n), t) for t in timed) for n in names]])
    rows = recent[recent["benchmark"].isin(hits) & recent["value"].notna()]
    return rows.groupby("commit_id").size()


PARTIAL_SHARE = 0.5  # Compare: a commit that ran fewer than half of the fullest one's cases is a partial run


def default_commit(commits: pd.DataFrame, points: pd.Series, unit: str = "points", fullest: str = "the fullest grid",
                   share: float = 1.0) -> tuple[str | None, str]:
    """The commit the page opens on and a line saying why, when it is not the newest: the newest commit that
    measured at least ``share`` of the most points of the grid (``grid_points`` over the newest commits: the
    fullest grid, for charts), so a partial run (a few cases re-measured) does not open on two points; Compare
    counts the results that ran with ``share`` :data:`PARTIAL_SHARE`, so one case failed or removed does not pin
    it to an older commit (a review). (None, "") keeps the newest."""
    if commits.empty or points.empty:
        return None, ""
    counts = commits["commit_id"].map(points).fillna(0).astype(int).to_numpy()
    shas = commits["sha"].astype(str).to_numpy()
    full = int(counts.max())
    enough = counts >= share * full
    if enough[-1]:
        return None, ""
    at = int(np.flatnonzero(enough)[-1])
    # Plain text (no Markdown): the dashboard's caption and the static site's note alike.
    newer = [f"{fmt.short_sha(s)} {int(n):,} {unit}" for s, n in zip(shas[at + 1:], counts[at + 1:], strict=True)]
    listed = ", ".join(newer[-5:][::-1]) + (f" and {len(newer) - 5:,} more" if len(newer) > 5 else "")
    most = f"{fullest} ({full:,} {unit})" if counts[at] == full else \
        f"at least half of {fullest} ({int(counts[at]):,} of {full:,} {unit})"
    return str(shas[at]), f"the newest commit with {most}; newer commits measured fewer (newest first): {listed}."
