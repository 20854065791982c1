"""The History page's Vega-Lite spec (``history_spec``): series over a machine's commits with IQR bars, one
threshold band at a time, flagged regressions and their fixes, failed runs, benchmark-version changes and
event markers. Pure functions of data frames, in the conventions of ``dashboard.charts`` (its palette, legends
and the main frame as the top-level "data")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dashboard import fmt
from dashboard.charts import (
    BETTER,
    FAILED_COLOR,
    NUMBER_LABELS,
    OKABE_ITO,
    OUTLINE,
    RULE,
    STAR,
    WORSE,
    X_MARK,
    _inline,
    _legend,
    _scale,
    _title,
    log_scale,
)
from regressions.results import version_changed

# Above this many points a history series is drawn with small points and no IQR bars: each is an SVG element,
# and tens of thousands of them take the browser long to lay out (the IQR stays in the hover).
DENSE = 150
# A history chart with more points than this is drawn on a canvas without per-mark ARIA descriptions: what
# Streamlit itself does only from 2,000 points (canvas) and 5,000 marks (ARIA off), where a few hundred
# already cost the browser a large part of the page's first render.
CANVAS = 600
# A series with more drawn points than this (the whole history of a machine with many commits) is thinned to
# about this many: a chart about 1,200 px wide shows no more, and each point is data the browser ingests and
# lays out in every layer (``thin``).
MAX_POINTS = 500
THINNED = (f"Thinned to about {MAX_POINTS} points per series: each run of commits' lowest and highest value, "
           "every flagged regression and fix; the values per commit below list every commit.")
SHA_PARAM = "commit_sha"  # the chart's parameter: the short SHAs of its drawn commits, for axis labels
BAND_PARAM = "band_of"  # the chart's legend selection: the series whose threshold band is drawn


@dataclass(frozen=True)
class _Drawn:
    """The points drawn (one row per ok point from ``start``, with band, IQR and hover columns), the positions
    where the benchmark's asv version changed with the series it changed in, and the ok points' values
    (unscaled) from ``start``."""

    pts: pd.DataFrame
    boundaries: dict[float, list[object]]
    ok: pd.DataFrame
    thinned: bool = False


def thin(pos: np.ndarray, values: np.ndarray, keep: set[float], limit: int = MAX_POINTS) -> np.ndarray:
    """Indices of one series' points (``pos`` ascending) to draw: every one when there are at most ``limit``;
    else, in each of ``limit // 2`` runs of consecutive points, the lowest and the highest (a spike or a dip
    stays visible), the first and the last point, and every point at a position in ``keep`` (flagged
    regressions, fixes, marked commits) with the point before it, so that a step is drawn where it happened."""
    n = len(pos)
    if n <= limit:
        return np.arange(n)
    runs = np.arange(n) * max(1, limit // 2) // n
    order = np.lexsort((values, runs))  # by run, then by value: each run's lowest first, highest last
    edge = runs[order][1:] != runs[order][:-1]
    lowest, highest = order[np.r_[True, edge]], order[np.r_[edge, True]]
    at = np.nonzero(np.isin(pos, list(keep)))[0] if keep else np.array([], dtype=int)
    return np.unique(np.concatenate([[0, n - 1], lowest, highest, at, np.maximum(at - 1, 0)]).astype(int))


def _hover_columns(d: pd.DataFrame, unit: str | None) -> dict[str, object]:
    """The hover text of the points ``d``: value with its IQR, commit, dates, runs, version, config."""
    return {
        "value": [fmt.fmt_value(v, unit)
                  + (f" (IQR {fmt.fmt_value(a, unit)}..{fmt.fmt_value(b, unit)})" if a == a and b == b else "")
                  for v, a, b in zip(d["value"].to_numpy(float), d["q_25"].to_numpy(float),
                                     d["q_75"].to_numpy(float), strict=True)],
        "commit": [f"{fmt.short_sha(h)} {t}" for h, t in zip(d["sha"].to_numpy(object),
                                                              d["subject"].to_numpy(object), strict=True)],
        "committed": d["date"].to_numpy(object),
        "run": [f"{r} ({n} run(s))" if isinstance(r, str) else np.nan
                for r, n in zip(d["run_date"].to_numpy(object), d["runs"].to_numpy(), strict=True)],
        "benchmark version": [fmt.short_sha(v, 10) if isinstance(v, str) else "?"
                              for v in d["benchmark_version"].to_numpy(object)],
        "kernel config": d["config"].to_numpy(object), "versions": d["versions"].to_numpy(object),
    }


def _drawn_points(points: pd.DataFrame, labels: list[object], *, unit: str | None, mult: float,
                  threshold: float | None, start: int, keep: dict[object, set[float]]) -> _Drawn:
    """Per series: its ok rows from ``start`` (``thin``ned, keeping the positions ``keep`` names), the threshold
    band around the median of its previous five values of its version (looking back before ``start``), and
    IQR bars while the series has at most ``DENSE`` points."""
    # Sorted once, then each series' rows by position (numpy arrays: a boolean selection of the frame per
    # series copies every column, and iterating pandas' Arrow strings costs more than the formatting).
    every_ok = points[points["status"] == "ok"].sort_values("pos")
    failed_at = {label: np.sort(f["pos"].to_numpy(float)) for label, f in points[points["status"] == "failed"]
                 .groupby("series", sort=False)}  # fmt: skip
    ok = every_ok.loc[every_ok["pos"] >= start, ["series", "pos", "value"]]
    groups = every_ok.groupby("series", sort=False).indices
    pos_all = every_ok["pos"].to_numpy()
    values_all = every_ok["value"].to_numpy(float)
    versions_all = every_ok["benchmark_version"].astype(str).to_numpy()
    boundaries: dict[float, list[object]] = {}
    drawn, lo, hi, q25, q75, segs = [], [], [], [], [], []
    thinned = False
    for label in labels:
        rows = groups.get(label)
        if rows is None:
            continue
        # The band looks back within the value's own benchmark version, as detection does: no band across the
        # version line the chart draws (a new version is other code, its first value has none before it).
        changed = version_changed(versions_all[rows])[1:]
        segment = np.concatenate([[0], np.cumsum(changed)])
        ref = (pd.Series(values_all[rows]).groupby(segment)
               .transform(lambda v: v.rolling(5, min_periods=1).median().shift(1)).to_numpy() * mult)
        pos = pos_all[rows].astype(float)
        for j in np.nonzero(changed)[0]:
            boundaries.setdefault((pos[j] + pos[j + 1]) / 2.0, []).append(label)
        band = bool(threshold) and len(rows) > 1
        from_start = np.nonzero(pos >= start)[0]
        if not len(from_start):
            continue
        shown = from_start[thin(pos[from_start], values_all[rows][from_start], keep.get(label, set()))]
        thinned |= len(shown) < len(from_start)
        n_shown = len(shown)
        iqr = n_shown <= DENSE
        none = np.full(n_shown, np.nan)
        drawn.append(rows[shown])
        # The line breaks at a failed run (asv's graphs and the site do): a segment per stretch between failures.
        segs.append(np.searchsorted(failed_at.get(label, np.empty(0)), pos[shown]))
        lo.append(ref[shown] / (1.0 + threshold) if band else none)
        hi.append(ref[shown] * (1.0 + threshold) if band else none)
        q25.append(every_ok["q_25"].to_numpy(float)[rows[shown]] * mult if iqr else none)
        q75.append(every_ok["q_75"].to_numpy(float)[rows[shown]] * mult if iqr else none)
    if drawn:
        d = every_ok.iloc[np.concatenate(drawn)]
        pts = pd.DataFrame({
            "series": d["series"].to_numpy(object), "pos": d["pos"].to_numpy(), "y": d["value"].to_numpy(float) * mult,
            "lo": np.concatenate(lo), "hi": np.concatenate(hi), "q25": np.concatenate(q25), "q75": np.concatenate(q75),
            "seg": np.concatenate(segs),
            **_hover_columns(d, unit),
        })
    else:
        pts = pd.DataFrame(columns=["series", "pos", "y"])
    boundaries = {b: s for b, s in boundaries.items() if b >= start - 0.5}  # one outside the x domain is drawn anyway
    return _Drawn(pts, boundaries, ok, thinned)


def _kept_positions(labels: list[object], flagged: pd.DataFrame | None,
                    events: Sequence[tuple[int, str]]) -> dict[object, set[float]]:
    """Per series, the positions ``thin`` keeps: its flagged regressions and their fixes, and every event."""
    keep = {label: {float(p) for p, _ in events} for label in labels}
    for r in flagged.itertuples() if flagged is not None else ():
        keep.setdefault(r.series, set()).update(float(p) for p in (r.pos, r.fixed_pos) if pd.notna(p))
    return keep


def _markers(points: pd.DataFrame, ok: pd.DataFrame, flagged: pd.DataFrame | None, *, mult: float, y_min: float,
             start: int) -> pd.DataFrame:
    """One row per marker from ``start``: failed runs (on the x axis), flagged regressions and their fixes (on
    their series' points)."""
    failed = points[(points["status"] == "failed") & (points["pos"] >= start)]
    marks = [pd.DataFrame({"kind": "failed run", "pos": failed["pos"], "y": y_min, "series": failed["series"],
                           "text": "failed at " + failed["sha"].map(fmt.short_sha) + " " + failed["subject"],
                           "change": ""})]
    if flagged is not None and not flagged.empty:
        at = ok.set_index(["series", "pos"])["value"] * mult
        fixed = flagged[flagged["fixed_pos"] >= start]
        flagged = flagged[flagged["pos"] >= start]
        marks += [
            pd.DataFrame({"kind": "flagged regression", "pos": flagged["pos"], "series": flagged["series"],
                          "y": [at.get((r.series, r.pos), np.nan) for r in flagged.itertuples()],
                          "text": flagged["text"], "change": flagged["change"]}),
            pd.DataFrame({"kind": "fixed here", "pos": fixed["fixed_pos"].astype(int), "series": fixed["series"],
                          "y": [at.get((r.series, int(r.fixed_pos)), np.nan) for r in fixed.itertuples()],
                          "text": fixed["fixed_text"], "change": ""}),
        ]
    return pd.concat(marks, ignore_index=True)


def _axes(pts: pd.DataFrame, *, unit: str | None, axis_unit: str, n: int, start: int,
          log_y: bool) -> tuple[dict, dict]:
    """The x (commit positions from ``start``, labelled by short SHA) and y (value in ``axis_unit``) encodings; a
    log y over every value drawn (``pts``, in ``axis_unit``: points, IQR bars, the band)."""
    # Tick labels: the commit at each integer position (zoomed in, the axis picks its own ticks), looked up in a
    # parameter holding the drawn commits' short SHAs: an array literal in the label expression is rebuilt by
    # Vega's expression interpreter for every label, each time the axis is laid out.
    x = {"field": "pos", "type": "quantitative", "scale": {"domain": [start - 0.5, max(n - 0.5, start + 0.5)],
                                                          "nice": False},
         "axis": {"title": "commit (history order)", "labelExpr": f"{SHA_PARAM}[datum.value - {int(start)}] || ''",
                  "labelAngle": -30, "tickMinStep": 1, "tickCount": 12}}
    quantity = "time" if fmt.is_time(unit) else "value"
    y: dict = {"field": "y", "type": "quantitative", "title": fmt.axis_title(quantity, axis_unit),
               "scale": {"zero": False}, "axis": {"labelExpr": NUMBER_LABELS}}
    drawn = pts[["y", "q25", "q75", "lo", "hi"]].to_numpy(float) if log_y and not pts.empty else np.empty(0)
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    if drawn.size:
        scale, ticks = log_scale(float(drawn.min()), float(drawn.max()))
        y.update(scale=scale, axis={"values": ticks, "labelExpr": NUMBER_LABELS})
    return x, y


def _series_layers(x: dict, y: dict, color: dict, *, band_of: object, dense: bool) -> list[dict]:
    """The band (of the series picked in the legend), IQR bars, lines and points of every series."""
    hover = [{"field": "series"}, {"field": "value"}, {"field": "commit"}, {"field": "committed"},
             {"field": "run"}, {"field": "benchmark version"}, {"field": "kernel config"}, {"field": "versions"}]
    return [
        {"transform": [{"filter": {"param": BAND_PARAM, "empty": False}}, {"filter": "isValid(datum.lo)"}],
         "mark": {"type": "area", "opacity": 0.22},
         "encoding": {"x": x, "y": {**y, "field": "lo"}, "y2": {"field": "hi"}, "color": color}},
        {"transform": [{"filter": "isValid(datum.q25) && isValid(datum.q75)"}],
         "mark": {"type": "rule", "opacity": 0.5, "strokeWidth": 1.2},
         "encoding": {"x": x, "y": {**y, "field": "q25"}, "y2": {"field": "q75"}, "color": color}},
        {"mark": {"type": "line", "strokeWidth": 1.8},
         "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"},
                    {"name": BAND_PARAM, "select": {"type": "point", "fields": ["series"]}, "bind": "legend",
                     "value": [{"series": band_of}]}],
         "encoding": {"x": x, "y": y, "color": color, "detail": {"field": "seg", "type": "nominal"}}},
        {"mark": {"type": "point", "filled": True, "opacity": 1},
         "encoding": {"x": x, "y": y, "color": color, "tooltip": hover, "size": {"value": 12 if dense else 40}}},
    ]


def _marker_layers(x: dict, y: dict, markers: pd.DataFrame, kinds: list[str]) -> list[dict]:
    """Flagged regressions, fixes and failed runs as one layer of symbols with their own legend."""
    if not kinds:
        return []
    look = {"flagged regression": (WORSE, "triangle-up"), "fixed here": (BETTER, STAR),
            "failed run": (FAILED_COLOR, X_MARK)}
    # The legend's symbols at the plot's size and a thin outline: at the legend's default size the outline
    # covered the triangle's and the star's fill (a white blob with a dot of colour).
    legend = {**_legend(kinds, title=None), "symbolSize": 200, "symbolStrokeWidth": 1}
    failed = "datum.kind == 'failed run'"
    return [
        {"data": _inline("markers", markers),
         "mark": {"type": "point", "filled": True, "opacity": 1},
         "encoding": {"x": x, "y": y,
                      "fill": {"field": "kind", "type": "nominal", "legend": legend,
                               "scale": _scale(kinds, [look[k][0] for k in kinds])},
                      "shape": {"field": "kind", "type": "nominal", "legend": legend,
                                "scale": _scale(kinds, [look[k][1] for k in kinds])},
                      # The cross is lines only (no area to fill): drawn in its colour, where the filled symbols
                      # get a light outline. In the outline's colour it was invisible, in the chart and legend.
                      "stroke": {"field": "kind", "type": "nominal", "legend": legend,
                                 "scale": _scale(kinds, [FAILED_COLOR if k == "failed run" else OUTLINE
                                                         for k in kinds])},
                      "strokeWidth": {"condition": {"test": failed, "value": 2}, "value": 1},
                      "size": {"condition": {"test": failed, "value": 90}, "value": 240},
                      "tooltip": [{"field": "series"}, {"field": "text", "title": "what"}, {"field": "change"}]}}]


def _version_lines(boundaries: dict[float, list[object]], series: list[object]) -> list[dict]:
    """One row per version line: its position, the series whose version changed there (every series of an
    overlay need not change at once: machines update at their own commits) and its label."""
    rows = []
    for b, changed in sorted(boundaries.items()):
        names = ", ".join(str(v) for v in changed)
        label = "benchmark version changed"
        if len(series) > 1 and len(changed) < len(series):  # an overlay: say whose line this is
            label += f" ({fmt.middle(names, 48)})"
        rows.append({"pos": b, "series": names, "label": label})
    return rows


def _rule_layers(x: dict, boundaries: dict[float, list[object]], events: Sequence[tuple[int, str]], start: int,
                 series: list[object]) -> list[dict]:  # fmt: skip
    """Dotted lines where the benchmark's version changed (naming the series in an overlay); a dashed, labelled
    line per event."""
    layers: list[dict] = []
    if boundaries:
        lines = {"values": _version_lines(boundaries, series)}
        tooltip = [{"field": "label", "title": "what"}, {"field": "series", "title": "series"}]
        layers += [
            {"data": lines, "mark": {"type": "rule", "color": RULE, "strokeDash": [2, 3], "strokeWidth": 1.2},
             "encoding": {"x": x, "tooltip": tooltip}},
            {"data": lines, "mark": {"type": "text", "fontSize": 10, "baseline": "bottom", "dy": -2},
             "encoding": {"x": x, "y": {"value": 0}, "text": {"field": "label"}, "tooltip": tooltip}},
        ]
    marked = {"values": [{"pos": int(p), "label": label} for p, label in events if p >= start]}
    layers += [{"data": marked, "mark": {"type": "rule", "color": OKABE_ITO[0], "strokeDash": [6, 3]},
                "encoding": {"x": x, "tooltip": [{"field": "label", "title": "event"}]}},
               {"data": marked, "mark": {"type": "text", "align": "left", "dx": 3, "color": OKABE_ITO[0]},
                "encoding": {"x": x, "y": {"value": 8}, "text": {"field": "label"}}}] if marked["values"] else []
    return layers


def history_spec(
    points: pd.DataFrame,
    *,
    title: str,
    unit: str | None,
    commits: pd.DataFrame,
    threshold: float | None = None,
    flagged: pd.DataFrame | None = None,
    log_y: bool = False,
    start: int = 0,
    events: Sequence[tuple[int, str]] = (),
) -> dict:
    """Series over the machine's commits (x = position in history, zoom and pan with the mouse), one line
    per ``series`` label, from the commit at position ``start`` on (the bands' medians still look back
    before it).

    ``points``: rows with series, pos, value, q_25, q_75, status, benchmark_version and hover columns (sha,
    subject, date, run_date, runs, config: the kernel configuration, versions: the run's GPU and versions).
    Draws IQR bars (series of up to ``DENSE`` points), the threshold band of one series at a time (the
    ``threshold`` either side of the median of its previous five values; a point past the band on the worse
    side moved more than the threshold): the first flagged series drawn, else the first series, and the one
    clicked in the legend (every series' band is in the data; drawing them all costs the browser a shaded
    area per point of every series, and overlaid they hide each other), markers for flagged regressions and
    the commits that fixed them (``flagged``: series, pos, fixed_pos, text, change, fixed_text), failed runs on
    the x-axis, a dotted line where the benchmark's asv version changed, and a dashed, labelled line per
    ``events`` (position, label: a git tag, a commit picked on the page)."""
    ok_values = points.loc[(points["status"] == "ok") & (points["pos"] >= start), "value"]
    mult, axis_unit = fmt.axis_unit(ok_values, unit)
    labels = list(pd.unique(points["series"]))
    drawn = _drawn_points(points, labels, unit=unit, mult=mult, threshold=threshold, start=start,
                          keep=_kept_positions(labels, flagged, events))
    pts, ok = drawn.pts, drawn.ok
    y_min = float(ok["value"].min()) * mult if not ok.empty else 0.0
    markers = _markers(points, ok, flagged, mult=mult, y_min=y_min, start=start)
    x, y = _axes(pts, unit=unit, axis_unit=axis_unit, n=len(commits), start=start, log_y=log_y)
    present = set(pts["series"].to_numpy(object))
    series = [v for v in labels if v in present]
    # One legend for the lines, bands and IQR bars of a series: opaque symbols (not the band's tint).
    color = {"field": "series", "type": "nominal", "scale": _scale(series, OKABE_ITO),
             "legend": {**_legend(series), "symbolType": "circle", "symbolOpacity": 1}}
    kinds = [k for k in ("flagged regression", "fixed here", "failed run") if k in set(markers["kind"])]
    flagged_drawn = [v for v in markers.loc[markers["kind"] == "flagged regression", "series"] if v in present]
    band_of = flagged_drawn[0] if flagged_drawn else (series[0] if series else "")
    layers = [*_series_layers(x, y, color, band_of=band_of, dense=len(pts) > DENSE * max(1, len(series))),
              *_marker_layers(x, y, markers, kinds), *_rule_layers(x, drawn.boundaries, events, start, series)]
    spec = {
        "title": {**_title(title), **({"subtitle": THINNED} if drawn.thinned else {})},
        "height": 520,
        "params": [{"name": SHA_PARAM, "value": [fmt.short_sha(v) for v in commits["sha"].to_numpy(object)[start:]]}],
        "data": {"values": pts},
        "layer": layers,
        # The legend picks the shaded series; the others stay fully drawn (faded entries looked hidden).
        "config": {"legend": {"unselectedOpacity": 1}},
    }
    if len(pts) > CANVAS:
        spec.update(usermeta={"embedOptions": {"renderer": "canvas"}})
        spec["config"]["mark"] = {"aria": False}
    return spec
