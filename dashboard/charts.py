"""Plotly figures for the pages: colorblind-safe Okabe-Ito palette, units on every axis, legends below the
plot (never over the title, never cut), hover text in the units people read (``dashboard.fmt``).

Figures use SVG traces (``go.Scatter``, not WebGL) so they render in headless browsers without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import fmt, frames

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
# Above this many points a history trace is drawn as a line without markers or IQR bars: each marker and
# bar is an SVG element, and tens of thousands of them take seconds to lay out (the IQR stays in the hover).
DENSE = 150
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "hexagon", "cross")


def color_for(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, *, height: int = 460,
            legend_rows: int = 1) -> go.Figure:
    """Title on top, legend in its own band under the x-axis title, so neither overlaps nor gets clipped."""
    bottom = 70 + 24 * legend_rows
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        template="plotly_white",
        height=height + 24 * max(0, legend_rows - 1),
        margin={"l": 70, "r": 20, "t": 50, "b": bottom},
        legend={"title": None, "orientation": "h", "yanchor": "top", "y": -0.16 - 0.02 * legend_rows,
                "xanchor": "left", "x": 0, "font": {"size": 12}},
        hovermode="closest",
        hoverlabel={"align": "left"},
    )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return fig


def _on_grid(df: pd.DataFrame, grid: Sequence[float], x: str, y: str) -> pd.DataFrame:
    """``df`` reindexed on every x of ``grid``: unmeasured points become gaps, so a line never runs straight
    through x values that were not measured on that side (``connectgaps`` stays off)."""
    one = df.drop_duplicates(subset=[x]).set_index(x)[[y]]
    return one.reindex(sorted(set(grid))).rename_axis(x).reset_index()


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks covering [lo, hi] (Plotly's own log ticks on a short range label 2, 3, ... 9 without units)."""
    if not (lo > 0 and hi > 0 and np.isfinite(lo) and np.isfinite(hi)):
        return []
    out = []
    for e in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1):
        out += [m * 10.0**e for m in (1, 2, 5)]
    inside = [t for t in out if lo / 1.25 <= t <= hi * 1.25]
    return inside if len(inside) >= 2 else out


def history_figure(
    points: pd.DataFrame,
    *,
    title: str,
    unit: str | None,
    commits: pd.DataFrame,
    threshold: float | None = None,
    flagged: pd.DataFrame | None = None,
    log_y: bool = False,
    band_series: int = 4,
) -> go.Figure:
    """Series over the machine's commits (x = position in history), one trace per ``series`` label.

    ``points``: rows with series, pos, value, q_25, q_75, status, benchmark_version and hover columns (sha,
    subject, date, run_date, runs, config: the kernel configuration, versions: the run's GPU and versions).
    Draws IQR bars (up to ``DENSE`` points), a threshold band per series (the
    ``threshold`` either side of the median of its previous five values; a point past the band on the worse
    side moved more than the threshold), markers for flagged regressions and the commits that fixed them
    (``flagged``: series, pos, fixed_pos, text), failed runs on the x-axis, and a dotted line where the
    benchmark's asv version changed."""
    ok = points[points["status"] == "ok"]
    mult, axis_unit = fmt.time_unit(ok["value"]) if fmt.is_time(unit) else (1.0, str(unit or ""))
    fig = go.Figure()
    labels = list(dict.fromkeys(points["series"]))
    boundaries: set[float] = set()
    y_min = float(ok["value"].min()) * mult if not ok.empty else 0.0
    for i, label in enumerate(labels):
        color = color_for(i)
        s = ok[ok["series"] == label].sort_values("pos")
        if s.empty:
            continue
        y = s["value"].to_numpy(float) * mult
        if threshold and i < band_series and len(s) > 1:
            ref = s["value"].rolling(5, min_periods=1).median().shift(1).to_numpy(float) * mult
            hi, lo = ref * (1.0 + threshold), ref / (1.0 + threshold)
            fig.add_trace(go.Scatter(x=s["pos"], y=lo, mode="lines", line={"width": 0}, hoverinfo="skip",
                                     showlegend=False, legendgroup=label))
            fig.add_trace(go.Scatter(x=s["pos"], y=hi, mode="lines", line={"width": 0}, fill="tonexty",
                                     fillcolor=_rgba(color, 0.12), hoverinfo="skip", legendgroup=label,
                                     name=f"±{threshold:.0%} band", showlegend=i == 0))
        q25 = s["q_25"].to_numpy(float) * mult
        q75 = s["q_75"].to_numpy(float) * mult
        has_iqr = np.isfinite(q25) & np.isfinite(q75)
        dense = len(s) > DENSE
        error_y = None
        if has_iqr.any() and not dense:
            error_y = {"type": "data", "symmetric": False, "array": np.where(has_iqr, np.clip(q75 - y, 0, None), 0),
                       "arrayminus": np.where(has_iqr, np.clip(y - q25, 0, None), 0),
                       "color": _rgba(color, 0.5), "thickness": 1.2, "width": 2}
        text = [
            f"<b>{fmt.fmt_value(v, unit)}</b>"
            + (f" (IQR {fmt.fmt_value(a, unit)}..{fmt.fmt_value(b, unit)})" if a == a and b == b else "")
            for v, a, b in zip(s["value"], s["q_25"], s["q_75"], strict=True)
        ]
        custom = np.column_stack([
            text, s["sha"].map(fmt.short_sha), s["subject"], s["date"], s["run_date"], s["runs"],
            s["benchmark_version"].map(lambda v: fmt.short_sha(v, 10) if isinstance(v, str) else "?"),
            s["config"], s["versions"],
        ])
        fig.add_trace(go.Scatter(
            x=s["pos"], y=y, mode="lines" if dense else "lines+markers", name=label, legendgroup=label,
            line={"color": color, "width": 1.5 if dense else 1.8},
            marker={"size": 6, "symbol": SYMBOLS[i % len(SYMBOLS)]},
            error_y=error_y, customdata=custom,
            hovertemplate=(
                f"{label}<br>%{{customdata[0]}}<br>"
                "commit %{customdata[1]} %{customdata[2]}<br>committed %{customdata[3]}, "
                "run %{customdata[4]} (%{customdata[5]} run(s))<br>"
                "benchmark version %{customdata[6]}<br>"
                "%{customdata[7]}<br>%{customdata[8]}<extra></extra>"
            ),
        ))
        versions = s["benchmark_version"].astype(str).to_numpy()
        pos = s["pos"].to_numpy(float)
        for j in np.nonzero(versions[1:] != versions[:-1])[0]:
            boundaries.add((pos[j] + pos[j + 1]) / 2.0)
        failed = points[(points["series"] == label) & (points["status"] == "failed")]
        if not failed.empty:
            fig.add_trace(go.Scatter(
                x=failed["pos"], y=[y_min] * len(failed), mode="markers", name="failed run",
                legendgroup="failed", showlegend=not any(t.name == "failed run" for t in fig.data),
                marker={"symbol": "x-thin", "size": 11, "line": {"width": 2, "color": color}},
                customdata=np.column_stack([failed["sha"].map(fmt.short_sha), failed["subject"]]),
                hovertemplate=f"{label}<br>failed at %{{customdata[0]}} %{{customdata[1]}}<extra></extra>",
            ))
    if flagged is not None and not flagged.empty:
        yv = ok.set_index(["series", "pos"])["value"] * mult
        at = [yv.get((r.series, r.pos), np.nan) for r in flagged.itertuples()]
        fig.add_trace(go.Scatter(
            x=flagged["pos"], y=at, mode="markers", name="flagged regression",
            marker={"symbol": "triangle-up", "size": 16, "color": WORSE, "line": {"color": "black", "width": 1}},
            text=flagged["text"], hovertemplate="%{text}<extra></extra>",
        ))
        fixed = flagged.dropna(subset=["fixed_pos"])
        if not fixed.empty:
            fy = [yv.get((r.series, int(r.fixed_pos)), np.nan) for r in fixed.itertuples()]
            fig.add_trace(go.Scatter(
                x=fixed["fixed_pos"], y=fy, mode="markers", name="fixed here",
                marker={"symbol": "star", "size": 16, "color": BETTER, "line": {"color": "black", "width": 1}},
                text=fixed["fixed_text"], hovertemplate="%{text}<extra></extra>",
            ))
    for b in sorted(boundaries):
        fig.add_vline(x=b, line={"color": "#666666", "width": 1.2, "dash": "dot"},
                      annotation={"text": "benchmark version changed", "font": {"size": 10}},
                      annotation_position="top")
    n = len(commits)
    step = max(1, n // 12)
    ticks = list(range(0, n, step))
    fig.update_xaxes(tickvals=ticks, ticktext=[fmt.short_sha(commits["sha"].iloc[i]) for i in ticks],
                     tickangle=-30, range=[-0.5, max(n - 0.5, 0.5)])
    quantity = "time" if fmt.is_time(unit) else "value"
    rows = 1 + (len([t for t in fig.data if t.showlegend is not False]) > 5)
    _layout(fig, title, "commit (history order)", f"{quantity} ({axis_unit})", height=500, legend_rows=rows)
    if log_y:
        ticks = log_ticks(float(ok["value"].min()) * mult, float(ok["value"].max()) * mult) if not ok.empty else []
        fig.update_yaxes(type="log", tickvals=ticks or None, ticktext=[f"{t:,g}" for t in ticks] or None)
    return fig


STATUS_COLORS = {"regressed": WORSE, "improved": BETTER, "failed": "#000000", "unchanged": NEUTRAL,
                 "not_run": NEUTRAL, "new": OKABE_ITO[0], "removed": OKABE_ITO[5]}


# Vega-Lite specs (st.vega_lite_chart): the browser draws them with the Vega runtime Streamlit loads for any
# chart, instead of loading and parsing the 4.7 MB Plotly bundle on a tab's first chart.
# Data frames go under "datasets" (Streamlit sends them as Arrow); layers name the one they draw.
VL_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "triangle-down", "triangle-right",
              "triangle-left")
GAPS = "break-paths-filter-domains"  # a null value breaks the line: no segment across unmeasured points


def _title(text: str) -> dict:
    return {"text": text, "anchor": "start", "fontSize": 15, "offset": 12}


def _legend(labels: Sequence[object], *, title: str | None = None, width: int = 1000) -> dict:
    """Under the plot, in as many columns as the longest label lets fit ``width`` pixels: never over the
    title, never cut off at the chart's edge."""
    longest = max((len(str(v)) for v in labels), default=1)
    columns = max(1, min(len(labels), width // (7 * longest + 45)))
    return {"orient": "bottom", "title": title, "columns": columns, "labelLimit": 0, "labelFontSize": 12}


def _scale(domain: Sequence[object], values: Sequence[object]) -> dict:
    return {"domain": list(domain), "range": [values[i % len(values)] for i in range(len(domain))]}


def throughput_spec(
    current: pd.DataFrame,
    *,
    title: str,
    line_label: str,
    commit_label: str,
    baseline: pd.DataFrame | None = None,
    baseline_label: str = "",
    log_y: bool = True,
) -> dict:
    """One solid line per implementation at ``commit_label``; the baseline commit, if any, dashed.

    Both are drawn on the union of measured concurrencies with gaps where one side did not measure: the
    baseline's markers sit only at its measured points and its segments only join neighbouring ones."""
    base = baseline if baseline is not None and not baseline.empty else None
    lines = sorted(set(current["line"]) | (set(base["line"]) if base is not None else set()))
    grid = list(current["concurrency"]) + (list(base["concurrency"]) if base is not None else [])
    sides = [commit_label] + ([f"{baseline_label} (baseline)"] if base is not None else [])
    parts = []
    for frame, side in zip((current, base), sides, strict=False):
        for line in lines:
            rows = frame[frame["line"] == line]
            if not rows.empty:
                parts.append(_on_grid(rows, grid, "concurrency", "tokens_per_s").assign(
                    line=line, commit=side, baseline=frame is base))
    df = pd.concat(parts, ignore_index=True)
    df["text"] = [fmt.fmt_value(v, "tokens/s") for v in df["tokens_per_s"]]
    ticks = sorted({float(v) for v in grid if v and v > 0})
    measured = df["tokens_per_s"].dropna()
    y_axis: dict = {"title": "throughput (tokens/s)", "format": "~s"}
    if log_y and len(measured):
        y_axis["values"] = log_ticks(float(measured.min()), float(measured.max()))
    enc = {
        "x": {"field": "concurrency", "type": "quantitative", "scale": {"type": "log", "base": 2},
              "axis": {"values": ticks, "format": "~g", "title": "concurrency (requests, log2)"}},
        "y": {"field": "tokens_per_s", "type": "quantitative", "axis": y_axis,
              "scale": {"type": "log"} if log_y else {"zero": True}},
        "color": {"field": "line", "type": "nominal", "scale": _scale(lines, OKABE_ITO),
                  "legend": _legend(lines, title=line_label)},
    }
    tooltip = [{"field": "line", "title": line_label}, {"field": "concurrency", "title": "concurrency"},
               {"field": "text", "title": "throughput"}, {"field": "commit", "title": "commit"}]
    return {
        "title": _title(title),
        "height": 420,
        "datasets": {"points": df},
        "data": {"name": "points"},
        "encoding": enc,
        "layer": [
            {"mark": {"type": "line", "invalid": GAPS},
             "encoding": {"strokeDash": {"field": "commit", "type": "nominal", "scale": _scale(sides, ([1, 0], [6, 4])),
                                         "legend": {**_legend(sides, title="commit"), "symbolType": "stroke",
                                                    "symbolStrokeColor": "#444444", "symbolStrokeWidth": 2}},
                          "strokeWidth": {"condition": {"test": "datum.baseline", "value": 1.6}, "value": 2.5},
                          "detail": {"field": "commit"}}},
            {"mark": {"type": "point", "filled": True},
             "encoding": {"shape": {"field": "line", "type": "nominal", "scale": _scale(lines, VL_SYMBOLS),
                                    "legend": _legend(lines, title=line_label)},
                          "size": {"condition": {"test": "datum.baseline", "value": 35}, "value": 70},
                          "opacity": {"condition": {"test": "datum.baseline", "value": 0.7}, "value": 1},
                          "tooltip": tooltip}},
        ],
    }


def compare_spec(cmp: pd.DataFrame, *, title: str, top: int = 15) -> dict:
    """The ``top`` largest changes as bars of percent worse (right, vermillion) or better (left, green);
    bars of changes that are not significant or within the threshold are grey."""
    df = cmp.dropna(subset=["slowdown"]).copy()
    df["pct"] = (df["slowdown"].astype(float) - 1.0) * 100.0
    df = df.reindex(df["pct"].abs().sort_values(ascending=False).index).head(top)
    bars = pd.DataFrame({
        "series": list(frames.series_label(df["benchmark"], df["label"])),
        "pct": df["pct"].to_numpy(),
        "status": df["status"].to_numpy(),
        "change": [f"{fmt.fmt_value(b, u)} → {fmt.fmt_value(h, u)} ({fmt.fmt_ratio(r)}, p {fmt.fmt_p(p)})"
                   for b, h, u, r, p in zip(df["base"], df["head"], df["unit"], df["ratio"], df["p_value"],
                                            strict=True)],
        "pct_text": [f"{v:+.1f}% (direction-aware)" for v in df["pct"]],
    })
    statuses = [s for s in STATUS_COLORS if s in set(bars["status"])]
    return {
        "title": _title(title),
        "height": 22 * len(bars) + 190,  # the whole chart: title, axis titles and legend take 190 px
        "datasets": {"bars": bars},
        "data": {"name": "bars"},
        "layer": [
            {"mark": {"type": "bar", "height": {"band": 0.8}},
             "encoding": {
                 "y": {"field": "series", "type": "nominal", "sort": None,
                       "axis": {"title": None, "labelLimit": 700, "labelFontSize": 12}},
                 "x": {"field": "pct", "type": "quantitative", "axis": {
                     "title": ["% worse (+) or better (−), direction-aware",
                               "grey: within threshold or not significant"], "format": "+~g"}},
                 "color": {"field": "status", "type": "nominal",
                           "scale": {"domain": statuses, "range": [STATUS_COLORS[s] for s in statuses]},
                           "legend": _legend(statuses, title="status")},
                 "tooltip": [{"field": "series"}, {"field": "change"}, {"field": "pct_text", "title": "change"},
                             {"field": "status"}],
             }},
            {"mark": {"type": "rule", "color": "black", "strokeWidth": 1}, "encoding": {"x": {"datum": 0}}},
        ],
    }


def sweep_spec(
    df: pd.DataFrame, *, x: str, color: str | None, unit: str | None, title: str, log_x: bool = False
) -> dict:
    """Generic parameter sweep: value against parameter ``x``, one line per value of ``color``."""
    mult, axis_unit = fmt.time_unit(df["value"]) if fmt.is_time(unit) else (1.0, str(unit))
    xs = pd.to_numeric(df[x], errors="coerce")
    numeric_x = bool(xs.notna().all())
    name = color.removeprefix("p:") if color else None
    pts = pd.DataFrame({
        "x": xs if numeric_x else df[x].astype(str),
        "y": df["value"].astype(float) * mult,
        "group": [f"{name}={v}" for v in df[color]] if color else "value",
        "text": [fmt.fmt_value(v, unit) for v in df["value"]],
    }).sort_values(["group", "x"])
    groups = sorted(set(pts["group"]))
    x_name = x.removeprefix("p:")
    return {
        "title": _title(title),
        "height": 420,
        "datasets": {"points": pts},
        "data": {"name": "points"},
        "mark": {"type": "line", "point": {"filled": True, "size": 50}},
        "encoding": {
            "x": {"field": "x", "type": "quantitative" if numeric_x else "ordinal", "title": x_name,
                  **({"scale": {"type": "log"}} if log_x and numeric_x else {})},
            "y": {"field": "y", "type": "quantitative", "title": f"value ({axis_unit})"},
            "color": {"field": "group", "type": "nominal", "scale": _scale(groups, OKABE_ITO),
                      "legend": _legend(groups)},
            "tooltip": [{"field": "group", "title": "series"}, {"field": "x", "title": x_name},
                        {"field": "text", "title": "value"}],
        },
    }


def efficiency_spec(
    eff: pd.DataFrame,
    *,
    title: str,
    panels: Sequence[tuple[str, str, str]],
    line_label: str,
    peaks: dict[str, Sequence[tuple[str, float]]],
    log_y: bool = False,
) -> dict:
    """The derived metrics (roofline fraction, GB/s, TFLOP/s) against concurrency side by side, each panel
    with its own value axis, one legend for all, one line per kernel, the device's peaks as dashed lines.

    ``eff``: ``suites.efficiency_frame`` rows (metric, line, concurrency, value); ``panels``: (metric, title,
    unit); ``peaks``: metric -> [(label, value in the metric's unit)]."""
    lines = [str(v) for v in frames.value_order(eff["line"])]
    grid = list(eff["concurrency"])
    heads = {m: f"{t} ({'% of roofline' if u == 'fraction' else u})" for m, t, u in panels}
    curves, refs = [], []
    for metric, _, unit in panels:
        scale = 100.0 if unit == "fraction" else 1.0
        suffix = "%" if unit == "fraction" else f" {unit}"
        rows = eff[eff["metric"] == metric]
        for line in lines:
            pts = _on_grid(rows[rows["line"] == line], grid, "concurrency", "value")
            curves.append(pts.assign(panel=heads[metric], line=line, value=pts["value"] * scale,
                                     text=[fmt.fmt_value(v, unit) for v in pts["value"]]))
        for j, (label, value) in enumerate(peaks.get(metric, ())):
            refs.append({"panel": heads[metric], "value": value * scale, "dash": j % 3,
                         "label": f"{label}: {fmt.sig(value * scale)}{suffix}"})
    # Curves and peak lines in one frame: the layers of a facet share its data.
    data = pd.concat([*curves, pd.DataFrame(refs, columns=["panel", "value", "dash", "label"])], ignore_index=True)
    data["kind"] = np.where(data["label"].isna(), "curve", "peak")
    y: dict = {"field": "value", "type": "quantitative", "title": None, "axis": {"format": ",~g"}}
    if log_y:
        # One tick list for every panel: each axis draws only the ticks inside its own domain.
        ticks = {t for _, v in data.groupby("panel")["value"] for t in log_ticks(v[v > 0].min(), v.max())}
        y.update(scale={"type": "log"}, axis={"values": sorted(ticks), "format": ",~g"})
    x = {"field": "concurrency", "type": "quantitative", "scale": {"type": "log", "base": 2},
         "axis": {"values": sorted({float(v) for v in grid if v > 0}), "format": "~g",
                  "title": "concurrency (requests, log2)"}}
    peak = {"filter": "datum.kind == 'peak'"}
    label = {"y": y, "x": {"value": 4}, "text": {"field": "label"}}
    return {
        "title": _title(title),
        "datasets": {"efficiency": data},
        "data": {"name": "efficiency"},
        "facet": {"column": {"field": "panel", "type": "nominal", "sort": list(heads.values()),
                             "header": {"title": None, "labelFontSize": 13, "labelAnchor": "start"}}},
        # A facet keeps its own width (Streamlit does not stretch it): the panels fit a 1,000 px wide page.
        "spec": {"width": 900 // max(1, len(panels)) - 75, "height": 320, "layer": [
            {"transform": [{"filter": "datum.kind == 'curve'"}],
             "mark": {"type": "line", "invalid": GAPS, "point": {"filled": True, "size": 50}},
             "encoding": {"x": x, "y": y,
                          "color": {"field": "line", "type": "nominal", "scale": _scale(lines, OKABE_ITO),
                                    "legend": _legend(lines, title=line_label)},
                          "tooltip": [{"field": "line", "title": line_label}, {"field": "concurrency"},
                                      {"field": "text", "title": "value"}]}},
            {"transform": [peak], "mark": {"type": "rule", "color": "#444444", "strokeWidth": 1.2},
             "encoding": {"y": y, "strokeDash": {"field": "dash", "type": "ordinal", "legend": None,
                                                 "scale": _scale([0, 1, 2], ([2, 2], [6, 4], [6, 3, 2, 3]))},
                          "tooltip": {"field": "label"}}},
            # Labels alternate above and below their line, so two close peaks stay readable.
            {"transform": [peak, {"filter": "datum.dash % 2 == 0"}],
             "mark": {"type": "text", "align": "left", "baseline": "bottom", "dy": -3, "fontSize": 10},
             "encoding": label},
            {"transform": [peak, {"filter": "datum.dash % 2 == 1"}],
             "mark": {"type": "text", "align": "left", "baseline": "top", "dy": 3, "fontSize": 10},
             "encoding": label},
        ]},
        "resolve": {"scale": {"y": "independent"}},
    }
