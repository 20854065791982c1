"""History's chart thinned to what a chart can show (``history_chart.thin``): the whole history of a machine
with many commits keeps every flagged regression, fix, marked commit, spike and dip; and the pages stop
through ``widgets.stop`` so that a stopped run still writes its selections to the URL."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
from conftest import ROOT

from dashboard import history_chart

N = 3000
STEP_AT, FIX_AT, SPIKE_AT, DIP_AT, TAG_AT, FAILED_AT = 1237, 2411, 700, 1901, 2999 - 555, 1500


def _points() -> pd.DataFrame:
    """Two noisy series over ``N`` commits: "a" 10 us, 12 us from STEP_AT to FIX_AT, one 30 us spike and one
    6 us dip; "b" flat; a failed run of "a" at FAILED_AT."""
    rng = np.random.default_rng(7)
    a = 10e-6 * (1 + 0.01 * rng.standard_normal(N))
    a[STEP_AT:FIX_AT] *= 1.2
    a[SPIKE_AT], a[DIP_AT] = 30e-6, 6e-6
    b = 5e-6 * (1 + 0.01 * rng.standard_normal(N))
    frame = pd.DataFrame({
        "series": ["a"] * N + ["b"] * N, "pos": [*range(N), *range(N)], "value": [*a, *b],
        "q_25": math.nan, "q_75": math.nan, "status": "ok", "benchmark_version": "v1",
        "sha": [f"{i:040x}" for i in range(N)] * 2, "subject": "", "date": "2026-01-01 00:00",
        "run_date": "2026-01-01 00:00", "runs": 1, "config": "", "versions": "",
    })
    frame.loc[FAILED_AT, ["status", "value"]] = ["failed", math.nan]
    return frame


def _spec(points: pd.DataFrame, flagged: pd.DataFrame | None, **kw: object) -> dict:
    commits = pd.DataFrame({"sha": [f"{i:040x}" for i in range(N)], "pos": range(N)})
    return history_chart.history_spec(points, title="t", unit="seconds", commits=commits, threshold=0.05,
                                      flagged=flagged, **kw)  # type: ignore[arg-type]


def _flagged() -> pd.DataFrame:
    return pd.DataFrame({"series": ["a"], "pos": [STEP_AT], "fixed_pos": [FIX_AT], "text": ["regression #1"],
                         "change": ["+20%"], "fixed_text": ["#1 fixed"]})


def test_thinned_history_keeps_every_regression_fix_spike_and_event() -> None:
    points = _points()
    spec = _spec(points, _flagged(), events=[(TAG_AT, "v1.0")])
    drawn = spec["data"]["values"]
    per_series = drawn.groupby("series")["pos"].apply(set)
    limit = history_chart.MAX_POINTS + 12  # the kept positions come on top of the runs' lowest and highest
    assert all(len(p) <= limit for p in per_series), per_series.map(len)
    a = per_series["a"]
    # The step is drawn where it happened (the flagged commit and its parent), and so is the fix.
    assert {STEP_AT - 1, STEP_AT, FIX_AT - 1, FIX_AT, TAG_AT} <= a, sorted(a & set(range(STEP_AT - 3, STEP_AT + 3)))
    assert {SPIKE_AT, DIP_AT, 0, N - 1} <= a  # a single-commit spike and dip, the first and the newest commit
    assert TAG_AT in per_series["b"]  # an event is kept on every series
    y = drawn.set_index(["series", "pos"])["y"]
    assert y[("a", SPIKE_AT)] == max(y["a"]) and y[("a", DIP_AT)] == min(y["a"])
    # Every marker is drawn, on its point.
    markers = next(pd.DataFrame(r["data"]["values"]) for r in spec["layer"]
                   if r.get("data", {}).get("name") == "markers")
    got = {(k, int(p)) for k, p in zip(markers["kind"], markers["pos"], strict=True)}
    assert got == {("flagged regression", STEP_AT), ("fixed here", FIX_AT), ("failed run", FAILED_AT)}
    on_points = markers[markers["kind"] != "failed run"]
    for pos, marker_y in zip(on_points["pos"], on_points["y"], strict=True):
        assert marker_y == y[("a", int(pos))]
    # The failed run's cross is lines only: stroked in its own colour, never the outline's (white on white, it was
    # drawn and invisible, in the chart and its legend).
    layer = next(r for r in spec["layer"] if r.get("data", {}).get("name") == "markers")
    stroke = dict(zip(layer["encoding"]["stroke"]["scale"]["domain"], layer["encoding"]["stroke"]["scale"]["range"],
                      strict=True))  # fmt: skip
    fill = dict(zip(layer["encoding"]["fill"]["scale"]["domain"], layer["encoding"]["fill"]["scale"]["range"],
                    strict=True))  # fmt: skip
    assert stroke["failed run"] == fill["failed run"] != stroke["flagged regression"]
    assert spec["title"]["subtitle"] == history_chart.THINNED  # the chart says it is thinned


def test_thinned_band_is_the_unthinned_band_at_the_points_kept() -> None:
    """The threshold band of a kept point looks back at every value, not at the kept ones."""
    points = _points()
    thinned = _spec(points, _flagged())["data"]["values"].set_index(["series", "pos"])
    small = points[points["pos"] >= N - 400]  # 400 commits: drawn whole
    whole = _spec(small, None, start=N - 400)["data"]["values"].set_index(["series", "pos"])
    assert len(whole) == 2 * 400 - (N - 400 <= FAILED_AT)  # not thinned
    both = thinned.index.intersection(whole.index)
    both = both[both.get_level_values("pos") >= N - 395]  # past the first five, whose bands look further back
    assert len(both) > 50
    assert np.allclose(thinned.loc[both, ["lo", "hi"]], whole.loc[both, ["lo", "hi"]])


def test_the_band_does_not_look_across_a_benchmark_version() -> None:
    """A new asv version is other code: its first value has no band, and the next ones look back at its own values
    only (the band crossed the version line the chart draws, a median of the old code's values; review)."""
    points = _points()
    at = N - 100
    new_b = (points["series"] == "b") & (points["pos"] >= at)  # only b's version changes (the other machine's not)
    points.loc[new_b, "benchmark_version"] = "v2"
    points.loc[new_b, "value"] *= 10  # the new code: 10x the old
    spec = _spec(points, None, start=N - 150)
    band = spec["data"]["values"].set_index(["series", "pos"])
    assert band.loc[("b", at), ["lo", "hi"]].isna().all()  # the new version's first value: nothing before it
    # The overlay's version line names the series whose version changed there ("a" measured one version only).
    lines = [row for layer in spec["layer"] if layer.get("mark", {}).get("strokeDash") == [2, 3]
             for row in layer["data"]["values"]]  # fmt: skip
    assert lines == [{"pos": at - 0.5, "series": "b", "label": "benchmark version changed (b)"}], lines
    ref = band["lo"] * 1.05  # the median the band is drawn around, in us
    assert np.isclose(ref[("b", at + 3)], band.loc[("b", at + 3), "hi"] / 1.05)
    assert 48 < ref[("b", at + 3)] < 52 and 4.8 < ref[("b", at - 1)] < 5.2  # each version's own 50 us and 5 us
    # A value without a version (older asv) continues its segment, as detection reads it: no new band there.
    points.loc[(points["series"] == "b") & (points["pos"] == at + 5), "benchmark_version"] = None
    ref = _spec(points, None, start=N - 150)["data"]["values"].set_index(["series", "pos"])["lo"] * 1.05
    assert 48 < ref[("b", at + 5)] < 52 and 48 < ref[("b", at + 6)] < 52


def test_a_window_of_commits_is_drawn_whole() -> None:
    points = _points()
    spec = _spec(points, _flagged(), start=N - 250)
    drawn = spec["data"]["values"]
    assert len(drawn) == 2 * 250 and "subtitle" not in spec["title"]
    assert list(history_chart.thin(np.arange(10.0), np.zeros(10), set(), limit=10)) == list(range(10))


def test_pages_stop_through_widgets_stop() -> None:
    """``st.stop`` ends a run before its URL writes are sent (``widgets.url_writes``): a page that stopped
    with it would drop its selections from the link."""
    plain = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "dashboard").rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\bst\.stop\(\)", line) and p.name != "widgets.py"]
    assert plain == []


def test_the_line_breaks_at_a_failed_run() -> None:
    """A series' line is a segment per stretch between its failed runs, as asv's graphs and the site draw it (a
    review: the dashboard drew a straight line over four failed runs, a climb that never was); the other series'
    line is whole."""
    spec = _spec(_points(), None, start=FAILED_AT - 20)
    drawn = spec["data"]["values"]
    a, b = drawn[drawn["series"] == "a"], drawn[drawn["series"] == "b"]
    assert set(a.loc[a["pos"] < FAILED_AT, "seg"]) == {0} and set(a.loc[a["pos"] > FAILED_AT, "seg"]) == {1}
    assert set(b["seg"]) == {0}
    (line,) = [layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "line"]
    assert line["encoding"]["detail"] == {"field": "seg", "type": "nominal"}
