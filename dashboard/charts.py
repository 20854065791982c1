"""Vega-Lite specs for the pages (``st.vega_lite_chart``): colorblind-safe Okabe-Ito palette, units on every
axis, legends below the plot (never over the title, never cut), hover text in the units people read
(``dashboard.fmt``). Pure functions of data frames: each returns a spec dict whose main frame, the one its
layers share, is the top-level "data" (Streamlit sends it as Arrow; as a named dataset it cost History's first
render about 0.1 s more on 2 cores), and a small frame drawn by one layer is that layer's
inline data (``_inline``: with both top-level data and named datasets, Streamlit 1.67 drew the History chart
without its lines and colours).

Vega-Lite, not Plotly: the browser draws them with the Vega runtime Streamlit loads for any chart, where a
tab's first Plotly chart costs it the 4.7 MB Plotly bundle to load and parse (most of a second on 2 cores).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dashboard import fmt, frames
from regressions.direction import DOWN_IS_WORSE
from regressions.units import fmt_value_change, relative_change

# Okabe & Ito (2008), ordered so the first colours contrast best on white, yellow last; their black is a
# purple here: black lines vanish on Streamlit's dark background.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#CC79A7",  # reddish purple
    "#9467BD",  # purple (in black's place)
    "#F0E442",  # yellow
)
WORSE = "#D55E00"
BETTER = "#009E73"
NEUTRAL = "#999999"


def _on_grid(df: pd.DataFrame, grid: Sequence[float], x: str, y: str) -> pd.DataFrame:
    """``df`` reindexed on every x of ``grid``: unmeasured points become gaps, so a line never runs straight
    through x values that were not measured on that side (the lines break at nulls: ``GAPS``)."""
    one = df.drop_duplicates(subset=[x]).set_index(x)[[y]]
    return one.reindex(sorted(set(grid))).rename_axis(x).reset_index()


# Room beyond a log axis's outermost value, as a factor (about 5% of a decade's height on each side).
LOG_ROOM = 1.12


def _step(span: float, count: int) -> float:
    raw = span / max(1, count)
    mag = 10.0 ** math.floor(math.log10(raw))
    m = raw / mag
    return (1 if m <= 1 else 2 if m <= 2 else 5 if m <= 5 else 10) * mag


def linear_ticks(lo: float, hi: float, count: int = 6) -> tuple[list[float], float]:
    """1-2-5 ticks covering [lo, hi] (outermost ticks at or beyond both ends) and their step."""
    if not hi > lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = _step(hi - lo, count)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    ticks = [round(i * step, 12) for i in range(first, last + 1)]
    return [0.0 if abs(t) < step * 1e-9 else t for t in ticks], step


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks covering [lo, hi]: a log axis's own ticks give a short range too few labels or a long one
    too many. A range too short for two of them (38-50 us) gets linear 1-2-5 steps, which read alike on a log
    axis that short, not the decades around it (they drew 38-50 us on 10-100 us, the step flattened; a review)."""
    if not (lo > 0 and hi > 0 and np.isfinite(lo) and np.isfinite(hi)):
        return []
    out = []
    for e in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1):
        out += [m * 10.0**e for m in (1, 2, 5)]
    inside = [t for t in out if lo / 1.25 <= t <= hi * 1.25]
    return inside if len(inside) >= 2 else [t for t in linear_ticks(lo, hi)[0] if t > 0]


def log_domain(lo: float, hi: float, ticks: Sequence[float]) -> list[float]:
    """A log axis's domain: its ticks and a little room past the outermost values (at the domain's very edge the
    newest point was cut by the plot's border and hidden under its flag's triangle, a review)."""
    return [min(ticks[0], lo / LOG_ROOM), max(ticks[-1], hi * LOG_ROOM)] if ticks else [lo, hi]


def log_scale(lo: float, hi: float) -> tuple[dict, list[float]]:
    """A Vega-Lite log scale over [lo, hi] as the static site draws one (:func:`log_domain`, not "nice": Vega's own
    rounds out to whole decades) and its ticks."""
    if not (lo > 0 and hi >= lo and math.isfinite(lo) and math.isfinite(hi)):  # nothing positive: Vega's own
        return {"type": "log"}, []
    ticks = log_ticks(lo, hi)
    return {"type": "log", "nice": False, "domain": log_domain(lo, hi, ticks)}, ticks


OUTLINE, FAILED_COLOR, RULE = "#ffffff", OKABE_ITO[5], "#888888"  # seen on light and dark backgrounds alike
STATUS_COLORS = {"regressed": WORSE, "missing": WORSE, "improved": BETTER, "repaired": BETTER, "failed": FAILED_COLOR,
                 "unchanged": NEUTRAL, "not_run": NEUTRAL, "new": OKABE_ITO[0], "removed": OKABE_ITO[4],
                 "changed": OKABE_ITO[6], "untested": OKABE_ITO[1]}
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "triangle-down", "triangle-right", "triangle-left")
STAR = ("M0,-1L0.225,-0.309L0.951,-0.309L0.363,0.118L0.588,0.809L0,0.382L-0.588,0.809L-0.363,0.118"
        "L-0.951,-0.309L-0.225,-0.309Z")  # an SVG path: Vega has no star symbol
X_MARK = "M-1,-1L1,1M-1,1L1,-1"
GAPS = "break-paths-filter-domains"  # a null value breaks the line: no segment across unmeasured points
# Value-axis labels formatted in the label expression: with a "format" specifier Vega derives the precision from
# the tick step (d3's tickFormat), which turns ",~g" into "2e+2, 1.8e+2" and "~s" into a shared prefix ("0M").
NUMBER_LABELS = "format(datum.value, ',~r')"
SI_LABELS = "datum.value == 0 ? '0' : format(datum.value, '~s')"


def _inline(name: str, frame: pd.DataFrame) -> dict:
    """A layer's own data: the frame's rows as JSON values (missing as null), named for readers of the spec."""
    return {"name": name, "values": frame.astype(object).where(frame.notna(), None).to_dict("records")}


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
    y_axis: dict = {"title": "throughput (tokens/s)", "labelExpr": SI_LABELS}
    y_scale: dict = {"zero": True}
    if log_y and len(measured):
        y_scale, y_axis["values"] = log_scale(float(measured.min()), float(measured.max()))
    enc = {
        "x": {"field": "concurrency", "type": "quantitative", "scale": {"type": "log", "base": 2},
              "axis": {"values": ticks, "format": "~g", "title": "concurrency (requests, log2)"}},
        "y": {"field": "tokens_per_s", "type": "quantitative", "axis": y_axis,
              "scale": y_scale},
        "color": {"field": "line", "type": "nominal", "scale": _scale(lines, OKABE_ITO),
                  "legend": _legend(lines, title=line_label)},
    }
    tooltip = [{"field": "line", "title": line_label}, {"field": "concurrency", "title": "concurrency"},
               {"field": "text", "title": "throughput"}, {"field": "commit", "title": "commit"}]
    return {
        "title": _title(title),
        "height": 480,
        "data": {"values": df},
        "encoding": enc,
        "layer": [
            {"mark": {"type": "line", "invalid": GAPS},
             "encoding": {"strokeDash": {"field": "commit", "type": "nominal", "scale": _scale(sides, ([1, 0], [6, 4])),
                                         "legend": {**_legend(sides, title="commit"), "symbolType": "stroke",
                                                    "symbolStrokeColor": RULE, "symbolStrokeWidth": 2,
                                                    "symbolSize": 600}},
                          "strokeWidth": {"condition": {"test": "datum.baseline", "value": 1.6}, "value": 2.5},
                          "detail": {"field": "commit"}}},
            {"mark": {"type": "point", "filled": True},
             "encoding": {"shape": {"field": "line", "type": "nominal", "scale": _scale(lines, SYMBOLS),
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
    # The value's own relative change (a rate 4,174 -> 18,780 is 350% better), signed + worse by direction.
    worse_up = df["direction"] != DOWN_IS_WORSE
    rel = [relative_change(b, h) for b, h in zip(df["base"], df["head"], strict=True)]
    df["pct"] = [(r if up else -r) * 100.0 if r is not None and math.isfinite(r) else 0.0
                 for r, up in zip(rel, worse_up, strict=True)]
    # Regressions first (worst first), then improvements, then the largest other changes: a lone regression
    # is never crowded out by larger improvements or by derived metrics (GB/s, roofline fraction) moving.
    rank = df["status"].map({"regressed": 0, "improved": 1}).fillna(2)
    df = df.assign(_rank=rank, _size=-df["pct"].abs()).sort_values(["_rank", "_size"], kind="stable").head(top)
    bars = pd.DataFrame({
        "series": list(df["series"]),
        "label": fmt.short_labels(list(df["series"])),  # the axis: the part that tells the bars apart
        "pct": df["pct"].to_numpy(),
        "status": df["status"].to_numpy(),
        "change": [f"{fmt.fmt_before_after(b, h, u, benchmark=n)} ({fmt.fmt_ratio(r)}, "
                   f"p {fmt.fmt_p(p)})" for b, h, u, n, r, p in
                   zip(df["base"], df["head"], df["unit"], df["benchmark"], df["ratio"], df["p_value"], strict=True)],
        "pct_text": [fmt_value_change(b, h, d) for b, h, d in zip(df["base"], df["head"], df["direction"],
                                                                  strict=True)],
    })
    statuses = [s for s in STATUS_COLORS if s in set(bars["status"])]
    return {
        "title": _title(title),
        "padding": {"left": 5, "top": 5, "bottom": 5, "right": 16},  # the last tick's label ("+15") inside
        # The whole chart: title, axis titles and a one-line legend take 190 px, each further status 18 more.
        "height": 22 * len(bars) + 190 + 18 * max(0, len(statuses) - 1),
        "data": {"values": bars},
        "layer": [
            {"mark": {"type": "bar", "height": {"band": 0.8}},
             "encoding": {
                 "y": {"field": "label", "type": "nominal", "sort": None,
                       # Names cut in their middle to what tells them apart (fmt.short_labels), at most 340 px
                       # (the hover has them whole): at 700 the bars got 140 px of a 900 px window.
                       "axis": {"title": None, "labelLimit": 340, "labelFontSize": 12}},
                 "x": {"field": "pct", "type": "quantitative", "axis": {
                     "title": ["% worse (+) / better (−)", "grey: within threshold", "or not significant"],
                     "format": "+~r"}},
                 "color": {"field": "status", "type": "nominal",
                           "scale": {"domain": statuses, "range": [STATUS_COLORS[s] for s in statuses]},
                           # One column: the legend starts under the bars, which are narrow in a 900 px window.
                           "legend": _legend(statuses, title="status", width=150)},
                 "tooltip": [{"field": "series"}, {"field": "change"}, {"field": "pct_text", "title": "change"},
                             {"field": "status"}],
             }},
            {"mark": {"type": "rule", "color": RULE, "strokeWidth": 1}, "encoding": {"x": {"datum": 0}}},
        ],
    }


def sweep_spec(
    df: pd.DataFrame, *, x: str, color: str | None, unit: str | None, title: str, log_x: bool = False
) -> dict:
    """Generic parameter sweep: value against parameter ``x``, one line per value of ``color``."""
    mult, axis_unit = fmt.axis_unit(df["value"], unit)
    xs = pd.to_numeric(df[x], errors="coerce")
    numeric_x = bool(xs.notna().all())
    name = color.removeprefix("p:") if color else None
    pts = pd.DataFrame({
        # Text values cut in their middle to what tells them apart (``step.forward.fwd…`` read alike).
        "x": xs if numeric_x else fmt.short_labels(list(df[x].astype(str)), width=32, drop_module=False),
        "value of x": df[x].astype(str),
        "y": df["value"].astype(float) * mult,
        "group": [f"{name}={v}" for v in df[color]] if color else "value",
        "text": [fmt.fmt_value(v, unit) for v in df["value"]],
    }).sort_values(["group", "x"])
    groups = sorted(set(pts["group"]))
    x_name = x.removeprefix("p:")
    return {
        "title": _title(title),
        "height": 420,
        "data": {"values": pts},
        # A line joins the values of a numeric parameter; a text parameter's values are unrelated cases (a line
        # through 28 metrics of one benchmark, bytes beside us, drew a trend that is none): points alone.
        "mark": {"type": "line", "point": {"filled": True, "size": 50}} if numeric_x
        else {"type": "point", "filled": True, "size": 70},
        "encoding": {
            "x": {"field": "x", "type": "quantitative" if numeric_x else "ordinal", "title": x_name,
                  **({"scale": {"type": "log"}} if log_x and numeric_x else {})},
            "y": {"field": "y", "type": "quantitative", "title": fmt.axis_title("value", axis_unit)},
            "color": {"field": "group", "type": "nominal", "scale": _scale(groups, OKABE_ITO),
                      "legend": _legend(groups)},
            "tooltip": [{"field": "group", "title": "series"}, {"field": "value of x", "title": x_name},
                        {"field": "text", "title": "value"}],
        },
    }


def efficiency_specs(
    eff: pd.DataFrame,
    *,
    panels: Sequence[tuple[str, str, str]],
    line_label: str,
    peaks: dict[str, Sequence[tuple[str, float]]],
    log_y: bool = False,
) -> list[dict]:
    """The derived metrics (roofline fraction, GB/s, TFLOP/s) against concurrency, one chart per panel (the
    page sets them side by side, each as wide as its column: a facet keeps a fixed width), one line per
    kernel, the device's peaks as dashed lines.

    ``eff``: ``suites.efficiency_frame`` rows (metric, line, concurrency, value); ``panels``: (metric, title,
    unit); ``peaks``: metric -> [(label, value in the metric's unit)]."""
    lines = [str(v) for v in frames.value_order(eff["line"])]
    grid = list(eff["concurrency"])
    x = {"field": "concurrency", "type": "quantitative", "scale": {"type": "log", "base": 2},
         "axis": {"values": sorted({float(v) for v in grid if v > 0}), "format": "~g",
                  "title": "concurrency (requests, log2)"}}
    out = []
    for metric, title, unit in panels:
        rows = eff[eff["metric"] == metric]
        scale, name = fmt.axis_unit(rows["value"], unit)
        suffix = name if unit == "fraction" else f" {name}"
        curves = [_on_grid(rows[rows["line"] == line], grid, "concurrency", "value").assign(line=line)
                  for line in lines]
        curve = pd.concat(curves, ignore_index=True)
        curve["text"] = [fmt.fmt_value(v, unit) for v in curve["value"]]
        curve["value"] = curve["value"] * scale
        top = max((v for _, v in peaks.get(metric, ())), default=None)
        # The highest peak's label above its line, the others below theirs: two close peaks stay readable.
        refs = pd.DataFrame([{"value": value * scale, "dash": j % 3, "above": value == top,
                              "label": f"{label}: {fmt.sig(value * scale)}{suffix}"}
                             for j, (label, value) in enumerate(peaks.get(metric, ()))],
                            columns=["value", "dash", "above", "label"])
        data = pd.concat([curve, refs], ignore_index=True)
        data["kind"] = np.where(data["label"].isna(), "curve", "peak")
        y: dict = {"field": "value", "type": "quantitative", "title": None, "axis": {"labelExpr": NUMBER_LABELS}}
        if log_y:
            v = data["value"]
            scale, ticks = log_scale(float(v[v > 0].min()), float(v.max()))
            y.update(scale=scale, axis={"values": ticks, "labelExpr": NUMBER_LABELS})
        peak = {"filter": "datum.kind == 'peak'"}
        label = {"y": y, "x": {"value": 4}, "text": {"field": "label"}}
        # A legend under each: one under the first only would shrink that plot (a chart fits its height).
        legend = _legend(lines, title=line_label, width=300)
        out.append({
            "title": {**_title(f"{title} ({'% of roofline' if unit == 'fraction' else unit})"), "fontSize": 13},
            "data": {"values": data}, "height": 430,  # the whole chart: plot, axis titles and legend
            "layer": [
                {"transform": [{"filter": "datum.kind == 'curve'"}],
                 "mark": {"type": "line", "invalid": GAPS, "point": {"filled": True, "size": 50}},
                 "encoding": {"x": x, "y": y,
                              "color": {"field": "line", "type": "nominal", "scale": _scale(lines, OKABE_ITO),
                                        "legend": legend},
                              "tooltip": [{"field": "line", "title": line_label}, {"field": "concurrency"},
                                          {"field": "text", "title": "value"}]}},
                {"transform": [peak], "mark": {"type": "rule", "color": RULE, "strokeWidth": 1.2},
                 "encoding": {"y": y, "strokeDash": {"field": "dash", "type": "ordinal", "legend": None,
                                                     "scale": _scale([0, 1, 2], ([2, 2], [6, 4], [6, 3, 2, 3]))},
                              "tooltip": {"field": "label"}}},
                {"transform": [peak, {"filter": "datum.above"}],
                 "mark": {"type": "text", "align": "left", "baseline": "bottom", "dy": -3, "fontSize": 10},
                 "encoding": label},
                {"transform": [peak, {"filter": "!datum.above"}],
                 "mark": {"type": "text", "align": "left", "baseline": "top", "dy": 3, "fontSize": 10},
                 "encoding": label},
            ],
        })
    return out

