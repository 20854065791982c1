"""History: series of one benchmark over commits on the machine, several overlaid (one selector per
parameter), with the threshold band, flagged regressions and their fixes, benchmark-version changes and
per-point provenance on hover. The page's widgets and loaders over ``dashboard.history_model``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, fmt, history_chart, links, widgets
from dashboard import history_model as model
from regressions.direction import direction_for


def _pick_series(bench: str, params: model.Params, mine: pd.DataFrame) -> model.Selection:
    """One pill selector per parameter, defaulting to the flagged series; stops the page on an empty pick."""
    defaults = model.default_picks(mine, params.names)
    picked: dict[str, list[object]] = {}
    if params.names:
        # One row that wraps between parameters, each as wide as its pills (equal columns cut off the pills of a
        # parameter with many values). Such a parameter does not wrap its own pills, so where one's are wider
        # than the page, each takes a row of its own, where they wrap (uxarray's paths ran off the page).
        widest = max(sum(len(fmt.middle(v)) + 4 for v in params.values(n)) for n in params.names)
        one_row = widest <= model.PILLS_ONE_ROW
        with st.container(horizontal=one_row, gap="large" if one_row else "small"):
            for i, n in enumerate(params.names):
                values = params.values(n)
                default = model.pill_default(defaults, n, i, values, len(params.names))
                # A long value (a path's repr) cut in its middle: one pill wider than the page ran off it.
                picked[n] = widgets.url_pills(n, values, key=f"hp_{n}", default=default, format_func=fmt.middle)
    sel = model.select_series(params, picked, bench)
    if not sel.wanted:
        st.info("Pick at least one value of every parameter.")
        widgets.stop()
    if sel.picked > model.MAX_SERIES:
        st.warning(f"{sel.picked} series selected; showing the first {model.MAX_SERIES}. Narrow a parameter to see "
                   "others.")
    return sel


def _view_switches(ctx: widgets.Context, commits: pd.DataFrame, sel: model.Selection
                   ) -> tuple[bool, bool, str | None, list[str]]:
    """Log axis and whole history (pills, like the parameters: a toggle is one more kind of element to load),
    then the marked commit and the overlaid machines (in an expander closed by default: a closed expander
    builds nothing; a link that names either opens it)."""
    switches = {"hist_logy": ("Logarithmic value axis", len(sel.wanted) > 1 and "concurrency" in sel.varying)}
    if len(commits) > model.WINDOW:
        switches["hist_all"] = (f"Whole history ({fmt.plural(len(commits), 'commit')})", False)
    view = widgets.url_switches(
        "View", switches, key="hist_view",
        help=f"Whole history: every commit of the machine since these series' first result; off, the newest "
        f"{model.WINDOW} commits (and back to the oldest open flagged regression of these series), quicker to draw."
        if "hist_all" in switches else None)
    more = widgets.url_expander("Mark a commit, overlay other machines", key="hist_more",
                                default=bool(st.query_params.get("hist_at") or st.query_params.get("hist_vs")))
    marked, vs = None, []
    if more.open:
        with more:
            m1, m2 = st.columns(2)
            with m1:
                marked = widgets.commit_select("Mark a commit", commits, key="hist_at", allow_none=True,
                                               help="Draws a dashed line at this commit (the repository's git tags "
                                               "are marked in any case).")
            with m2:
                others = [m for m in data.machines(ctx.url)["name"] if m != ctx.machine]
                vs = widgets.url_pills("Overlay other machines", others, key="hist_vs",
                                       help="The same series measured on each machine picked, each at its own "
                                       "commits on one axis of all of theirs (as asv's graphs draw every machine).")
    return view["hist_logy"], view.get("hist_all", True), marked, vs


def _points(ctx: widgets.Context, bench: str, commits: pd.DataFrame, sel: model.Selection, start: int,
            vs: list[str], marked: str | None) -> tuple[pd.DataFrame, pd.DataFrame, int, bool]:
    """The history read (from ten commits before the first drawn: the bands look back five values), the points
    with their hover columns and the other machine's, the start (0 for series retired before it, the first
    result's commit for series that began after it: :func:`model.first_drawn`) and whether results before it are
    left out."""
    wanted = tuple(sel.wanted)
    hist = data.history(ctx.url, ctx.machine, bench, wanted, model.commit_ids_from(commits, max(0, start - 10))
                        if start else None)
    if hist.empty and start:  # retired series, measured only before the window: draw their whole history
        start = 0
        hist = data.history(ctx.url, ctx.machine, bench, wanted)
    if hist.empty:
        st.info("No results for these series on this machine.")
        widgets.stop()
    points = model.points_of(hist, commits, sel.label_of)
    launch = data.launch_config(ctx.url, ctx.machine, bench, wanted, model.commit_ids_from(commits, start))
    points = model.with_configs(points, launch, start)
    run_info = data.run_infos(ctx.url, model.drawn_run_ids(points, start))
    points = model.with_versions(points, run_info, data.machine_info(ctx.url, ctx.machine), start)
    shown = []
    for other in vs:
        both = model.overlay(points, data.history(ctx.url, other, bench, wanted), commits, sel.label_of, other,
                             start)  # fmt: skip
        if both is None:
            st.caption(f"`{other}` measured none of these series at the commits drawn.")
        else:
            points, shown = both, [*shown, other]
    keep = commits.loc[commits["sha"] == marked, "pos"] if marked else ()
    start, cut = model.first_drawn(points, start, int(keep.iloc[0]) if len(keep) else None)
    return hist, model.in_legend_order(points, sel, shown), start, cut


def _tables(ctx: widgets.Context, flag: pd.DataFrame, points: pd.DataFrame, commits: pd.DataFrame,
            sel: model.Selection, start: int, unit: str | None) -> None:
    """The flagged regressions of the series drawn, and the values per commit of this machine (``commits``; in a
    closed expander)."""
    if not flag.empty:
        st.subheader("Flagged regressions of these series")
        st.markdown(fmt.md_table(model.flagged_table(flag, sel.label_of, unit)))
        links.page_links((f"Compare {fmt.commit_range(p, s)}", links.compare(ctx.machine, p, s))
                         for p, s in model.compare_pairs(flag))
    drawn_commits = commits[commits["pos"] >= start]  # this machine's (an overlay's axis holds others' too)
    values_box = widgets.url_expander(f"Values per commit ({fmt.plural(len(drawn_commits), 'commit')} drawn)",
                                      key="hist_values")
    if not values_box.open:
        return
    table = model.values_table(points, drawn_commits, [sel.label_of[k] for k in sel.wanted], unit)
    config: dict[str, object] = {}
    if ctx.repo_url:
        table.insert(1, "link", [links.commit_url(ctx.repo_url, s) for s in drawn_commits["sha"]])
        config["link"] = st.column_config.LinkColumn("link", display_text="open")
    with values_box:
        st.dataframe(table.iloc[::-1], hide_index=True, width="stretch", column_config=config, height=320)
        st.caption("Newest first. \"not run\": the commit was measured on this machine without this case (asv "
                   "skipped it or was not asked for it); \"failed\": the case ran and failed.")


def main() -> None:
    ctx = widgets.context()
    st.title("History")
    series = data.series(ctx.url, ctx.machine)
    if series.empty:
        st.info(f"No series on machine `{ctx.machine}`.")
        widgets.stop()
    commits = data.commits(ctx.url, ctx.machine)
    regs = data.regressions(ctx.url, ctx.machine)
    names = sorted(series["benchmark"].unique())
    bench = widgets.url_selectbox("Benchmark", names, key="hist_bench", default=model.default_benchmark(names, regs))
    rows = series[series["benchmark"] == bench]
    stored = rows["unit"].iloc[0] if rows["unit"].notna().any() else None
    unit = fmt.unit_of(bench, stored)  # a track_ without a unit is a count, not seconds (values and axis)
    params = model.benchmark_params(rows)
    widgets.drop_unknown_keys("hp_", params.names, f"`{bench}` has no parameter")
    mine = regs[regs["benchmark"] == bench] if not regs.empty else regs
    sel = _pick_series(bench, params, mine)
    log_y, whole, marked, vs = _view_switches(ctx, commits, sel)
    own = set(commits["commit_id"])
    if vs:  # one axis of every overlaid machine's commits: each machine at its own
        commits = data.commits_on(ctx.url, (ctx.machine, *vs))
    flag = model.flagged_of(mine, sel.wanted)
    hist, points, start, cut = _points(ctx, bench, commits, sel, model.window_start(commits, flag, whole=whole), vs,
                                       marked)
    settings = data.settings()
    threshold = settings.threshold_for(bench)
    spec = history_chart.history_spec(
        points, title=model.chart_title(bench, ctx.machine, params, sel), unit=unit, commits=commits,
        threshold=threshold, flagged=model.flagged_markers(flag, commits, sel.label_of, unit), log_y=log_y,
        start=start, events=model.events(data.tags(), commits, marked))
    st.vega_lite_chart(spec, width="stretch", key="hist_chart")
    st.caption(model.caption(commits, start, ctx.machine, threshold=threshold,
                             lower_is_better=direction_for(bench, stored, settings) == "up_is_worse",
                             environments=hist["environment"].dropna().unique(), overlaid=vs,
                             ran=model.ran_at(points, start), cut=cut),
               help=model.legend_help(threshold))
    _tables(ctx, flag, points, commits[commits["commit_id"].isin(own)], sel, start, unit)


if __name__ == "__main__":
    main()
