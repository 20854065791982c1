"""Plotly figures for the pages: colorblind-safe Okabe-Ito palette, units on every axis.

Figures use SVG traces (``go.Scatter``, not WebGL) so they render in headless browsers without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.frames import display_scale, short_sha

# Okabe & Ito (2008), ordered so the first colours contrast best on white; yellow last.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#CC79A7",  # reddish purple
    "#000000",  # black
    "#F0E442",  # yellow
)
WORSE = "#D55E00"
BETTER = "#009E73"
NEUTRAL = "#999999"
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "hexagon", "cross")


def color_for(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, *, height: int = 440) -> go.Figure:
    fig.update_layout(
        title=title,
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 90, "b": 50},
        legend={"title": None, "orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
        hovermode="closest",
    )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return fig


def _pow2_axis(fig: go.Figure, values: Sequence[float]) -> None:
    """Log axis with ticks at the measured concurrencies (powers of two spread evenly)."""
    ticks = sorted({float(v) for v in values if v and v > 0})
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks])


def throughput_figure(
    current: pd.DataFrame,
    *,
    title: str,
    line_label: str,
    commit_label: str,
    baseline: pd.DataFrame | None = None,
    baseline_label: str = "",
    log_y: bool = True,
    y_col: str = "tokens_per_s",
    y_title: str = "throughput (tokens/s)",
) -> go.Figure:
    """One solid line per implementation at ``commit_label``; the baseline commit, if any, dashed."""
    fig = go.Figure()
    lines = sorted(set(current["line"]) | (set(baseline["line"]) if baseline is not None else set()))
    for i, line in enumerate(lines):
        cur = current[current["line"] == line].sort_values("concurrency")
        if not cur.empty:
            fig.add_trace(
                go.Scatter(
                    x=cur["concurrency"], y=cur[y_col], mode="lines+markers",
                    name=f"{line} @ {commit_label}", legendgroup=line,
                    line={"color": color_for(i), "width": 2.5},
                    marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 8},
                    hovertemplate=(f"{line_label}={line}<br>concurrency=%{{x}}<br>%{{y:.4s}} "
                                   f"{y_title.split('(')[-1].rstrip(')')}<extra>{commit_label}</extra>"),
                )
            )
        if baseline is not None and not baseline.empty:
            base = baseline[baseline["line"] == line].sort_values("concurrency")
            if base.empty:
                continue
            fig.add_trace(
                go.Scatter(
                    x=base["concurrency"], y=base[y_col], mode="lines+markers",
                    name=f"{line} @ {baseline_label} (baseline)", legendgroup=line,
                    line={"color": color_for(i), "width": 1.5, "dash": "dash"},
                    marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 6, "opacity": 0.6},
                    hovertemplate=(f"{line_label}={line}<br>concurrency=%{{x}}<br>%{{y:.4s}}"
                                   f"<extra>{baseline_label}</extra>"),
                )
            )
    _layout(fig, title, "concurrency (requests, log2)", y_title)
    conc = list(current["concurrency"]) + (list(baseline["concurrency"]) if baseline is not None else [])
    _pow2_axis(fig, conc)
    if log_y:
        fig.update_yaxes(type="log", tickformat="~s")
    return fig


def efficiency_figure(df: pd.DataFrame, *, title: str, metric_title: str, line_label: str) -> go.Figure:
    """Achieved fraction of the roofline (or GB/s, TFLOP/s) against concurrency, one line per kernel."""
    fraction = metric_title.endswith("(fraction)")
    plot = df.copy()
    if fraction:
        plot["value"] = plot["value"] * 100.0
        metric_title = metric_title.replace("(fraction)", "(% of roofline)")
    fig = throughput_figure(
        plot.rename(columns={"value": "y"}), title=title, line_label=line_label, commit_label="",
        log_y=False, y_col="y", y_title=metric_title,
    )
    for trace in fig.data:
        trace.name = trace.name.removesuffix(" @ ")
    if fraction:
        fig.update_yaxes(rangemode="tozero", ticksuffix="%")
    return fig


def history_figure(
    hist: pd.DataFrame,
    *,
    title: str,
    unit: str | None,
    flagged: pd.DataFrame | None = None,
    repo_url: str = "",
) -> go.Figure:
    """A series over commits in commit order, IQR (q_25..q_75) as error bars, flagged regressions marked.

    ``hist`` is ``db.queries.history`` output; ``flagged`` holds the regressions of this series (column sha).
    """
    mult, axis_unit = display_scale(unit, hist["value"].dropna())
    x = np.arange(len(hist))
    y = hist["value"].astype(float) * mult
    q25 = pd.to_numeric(hist.get("q_25"), errors="coerce") * mult if "q_25" in hist else None
    q75 = pd.to_numeric(hist.get("q_75"), errors="coerce") * mult if "q_75" in hist else None
    dates = pd.to_datetime(hist["date"], errors="coerce", utc=True).dt.strftime("%Y-%m-%d %H:%M")
    messages = hist["message"].fillna("").astype(str).str.split("\n").str[0].str.slice(0, 80) \
        if "message" in hist else pd.Series([""] * len(hist))
    custom = np.column_stack([hist["sha"].astype(str).str.slice(0, 12), dates.fillna(""), messages])
    error_y = None
    if q25 is not None and q75 is not None and (q25.notna() & q75.notna()).any():
        error_y = {
            "type": "data", "symmetric": False,
            "array": (q75 - y).clip(lower=0).fillna(0), "arrayminus": (y - q25).clip(lower=0).fillna(0),
            "color": "rgba(0,114,178,0.45)", "thickness": 1.2, "width": 2,
        }
    fig = go.Figure(
        go.Scatter(
            x=x, y=y, mode="lines+markers", name="value (median, IQR bars)",
            line={"color": OKABE_ITO[0], "width": 1.5}, marker={"size": 5}, error_y=error_y,
            customdata=custom, connectgaps=False,
            hovertemplate="%{customdata[0]}  %{customdata[1]}<br>%{customdata[2]}<br>"
                          f"%{{y:.4g}} {axis_unit}<extra></extra>",
        )
    )
    if flagged is not None and not flagged.empty:
        pos = {sha: i for i, sha in enumerate(hist["sha"].astype(str))}
        idx = [pos[s] for s in flagged["sha"].astype(str) if s in pos]
        if idx:
            fig.add_trace(
                go.Scatter(
                    x=idx, y=y.iloc[idx], mode="markers", name="flagged regression",
                    marker={"symbol": "triangle-up", "size": 15, "color": WORSE,
                            "line": {"color": "black", "width": 1}},
                    customdata=custom[idx],
                    hovertemplate="regression at %{customdata[0]}<br>%{customdata[2]}<extra></extra>",
                )
            )
    # Label about a dozen commits by short sha; the rest are reachable via hover.
    step = max(1, len(hist) // 12)
    ticks = list(range(0, len(hist), step))
    fig.update_xaxes(tickvals=ticks, ticktext=[short_sha(hist["sha"].iloc[i]) for i in ticks], tickangle=-30)
    quantity = "time" if axis_unit in ("s", "ms", "µs", "ns") else "value"
    return _layout(fig, title, "commit (in commit order)", f"{quantity} ({axis_unit})")


def compare_figure(cmp: pd.DataFrame, *, title: str, top: int = 30) -> go.Figure:
    """The ``top`` biggest changes as bars of percent worse (right, vermillion) or better (left, green)."""
    df = cmp.dropna(subset=["worse_by"]).copy()
    df = df[df["worse_by"] > 0]
    df["pct"] = (df["worse_by"].astype(float) - 1.0) * 100.0
    df = df.reindex(df["pct"].abs().sort_values(ascending=False).index).head(top).iloc[::-1]
    colors = df["change"].map({"+": WORSE, "-": BETTER}).fillna(NEUTRAL)
    short = df["benchmark"].str.rsplit(".", n=2).str[-2:].str.join(".")
    labels = (short + " " + df["params"]).str.slice(0, 80)
    fig = go.Figure(
        go.Bar(
            x=df["pct"], y=labels, orientation="h", marker={"color": list(colors)},
            customdata=np.column_stack([df["benchmark"], df["params"], df["ratio"]]),
            hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>%{x:+.1f}% (head/base = "
                          "%{customdata[2]:.3f})<extra></extra>",
        )
    )
    fig.add_vline(x=0.0, line={"color": "black", "width": 1})
    _layout(fig, title, "% worse (+) or better (−), direction-aware; significant changes coloured", "",
            height=max(320, 22 * len(df) + 130))
    fig.update_layout(showlegend=False)
    return fig


def sweep_figure(
    df: pd.DataFrame, *, x: str, color: str | None, unit: str | None, title: str, log_x: bool = False
) -> go.Figure:
    """Generic parameter sweep: value against parameter ``x``, one line per value of ``color``."""
    mult, axis_unit = display_scale(unit, df["value"].dropna())
    fig = go.Figure()
    groups = [(None, df)] if not color else list(df.groupby(color, sort=True, dropna=False))
    numeric_x = pd.api.types.is_numeric_dtype(pd.to_numeric(df[x], errors="coerce").dropna()) and \
        pd.to_numeric(df[x], errors="coerce").notna().all()
    for i, (key, g) in enumerate(groups):
        xs = pd.to_numeric(g[x], errors="coerce") if numeric_x else g[x].astype(str)
        g = g.assign(_x=xs).sort_values("_x")
        name = f"{color.removeprefix('p:')}={key}" if color else "value"
        fig.add_trace(
            go.Scatter(
                x=g["_x"], y=g["value"].astype(float) * mult, mode="lines+markers", name=name,
                line={"color": color_for(i)}, marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": 7},
                hovertemplate=f"{x.removeprefix('p:')}=%{{x}}<br>%{{y:.4g}} {axis_unit}<extra>{name}</extra>",
            )
        )
    _layout(fig, title, x.removeprefix("p:"), f"value ({axis_unit})")
    if log_x and numeric_x:
        fig.update_xaxes(type="log")
    return fig
