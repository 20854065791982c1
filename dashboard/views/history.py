"""History: series of one benchmark over commits on the machine, several overlaid (one selector per
parameter), with the threshold band, flagged regressions and their fixes, benchmark-version changes and
per-point provenance on hover."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, frames, suites, widgets
from regressions.direction import direction_for

MAX_SERIES = 12
# Commits drawn by default (the newest, and back to the oldest open flagged regression of the series drawn);
# "Whole history" draws every commit. Each point costs the browser time to draw: 1,000 commits x 4 series
# took about 0.8 s of the page's first render on 2 cores, the newest 250 about 0.3 s.
WINDOW = 250

ctx = widgets.context()
st.title("History")

series = data.series(ctx.url, ctx.machine)
if series.empty:
    st.info(f"No series on machine `{ctx.machine}`.")
    st.stop()
commits = data.commits(ctx.url, ctx.machine)
regs = data.regressions(ctx.url, ctx.machine)

# Default: the benchmark of the newest open (else newest) flagged regression, else the MLA decode timing.
names = sorted(series["benchmark"].unique())
flagged_first = [b for cat in ("open", "suspect") for b in regs.loc[regs["category"] == cat, "benchmark"]] \
    + list(regs["benchmark"]) if not regs.empty else []
mla = [n for n in names if any(suites.matches(n, s.time_bench) for s in suites.SUITES)]
default_bench = next((b for b in flagged_first if b in names), mla[0] if mla else names[0])
bench = widgets.url_selectbox("Benchmark", names, key="hist_bench", default=default_bench)

rows = series[series["benchmark"] == bench]
keys = list(rows["params_key"])
unit = rows["unit"].iloc[0] if rows["unit"].notna().any() else None
declared = rows["param_names"].iloc[0]
pnames = [n for n in (declared if isinstance(declared, list) else []) if n] or frames.param_names(keys)
parsed = {k: frames.params_dict(k) for k in keys}
pnames = [n for n in pnames if any(n in p for p in parsed.values())]

# Default selection: the newest flagged series of this benchmark, overlaid with the other series flagged at
# that commit along one parameter (the one whose values differ most among them, e.g. concurrency); without
# flags, every value of the first parameter (implementations) and the first value of the others.
mine = regs[regs["benchmark"] == bench] if not regs.empty else regs
defaults: dict[str, list[object]] = {}
if not mine.empty:
    at = [frames.params_dict(k) for k in mine.loc[mine["sha"] == mine["sha"].iloc[0], "params_key"]]
    sweep = max(pnames, key=lambda n: len({str(p.get(n)) for p in at}), default=None)
    first = at[0]
    same = [p for p in at if all(p.get(n) == first.get(n) for n in pnames if n != sweep)]
    defaults = {n: [first.get(n)] for n in pnames if n != sweep}
    if sweep is not None:
        values = frames.value_order(p.get(sweep) for p in same)
        # At most four overlaid by default, spread over the flagged values (first and last included).
        defaults[sweep] = [values[round(i * (len(values) - 1) / 3)] for i in range(4)] if len(values) > 4 \
            else values
picked: dict[str, list[object]] = {}
if pnames:
    cols = st.columns(min(len(pnames), 4))
    for i, n in enumerate(pnames):
        values = frames.value_order(p.get(n) for p in parsed.values())
        default = defaults.get(n) or (values if i == 0 and len(pnames) > 1 else values[:1])
        with cols[i % len(cols)]:
            picked[n] = widgets.url_pills(n, values, key=f"hp_{n}", default=default)

wanted = [k for k in keys if all(parsed[k].get(n) in picked[n] for n in pnames)] if pnames else keys
if not wanted:
    st.info("Pick at least one value of every parameter.")
    st.stop()
if len(wanted) > MAX_SERIES:
    st.warning(f"{len(wanted)} series selected; showing the first {MAX_SERIES}. Narrow a parameter to see others.")
    # "first" in the selectors' numeric order, not the params_key text order ("1", "128", "16", "64")
    wanted = sorted(wanted, key=lambda k: [frames.rank(parsed[k].get(n)) for n in pnames])[:MAX_SERIES]
# Label each series by the parameters that differ between the selected ones.
varying = [n for n in pnames if len({parsed[k].get(n) for k in wanted}) > 1] or pnames
label_of = {k: frames.params_label(k, varying, only=True) or "value" for k in wanted}
wanted = sorted(wanted, key=lambda k: [frames.rank(parsed[k].get(n)) for n in varying])

# The view's switches as pills, like the parameters above (a toggle is one more kind of element to load).
switches = {"hist_logy": ("Logarithmic value axis", len(wanted) > 1 and "concurrency" in varying)}
if len(commits) > WINDOW:
    switches["hist_all"] = (f"Whole history ({fmt.plural(len(commits), 'commit')})", False)
view = widgets.url_switches(
    "View", switches, key="hist_view",
    help=f"Whole history: every commit of the machine; off, the newest {WINDOW} commits (and back to the oldest open "
    "flagged regression of these series), quicker to draw." if "hist_all" in switches else None)
log_y, whole = view["hist_logy"], view.get("hist_all", True)
# Closed by default (a closed expander builds nothing: two more pickers cost the page's first render); a link that
# names a marked commit or another machine opens it.
more = widgets.url_expander("Mark a commit, overlay another machine", key="hist_more",
                            default=bool(st.query_params.get("hist_at") or st.query_params.get("hist_vs")))
marked, vs = None, None
if more.open:
    with more:
        m1, m2 = st.columns(2)
        with m1:
            marked = widgets.commit_select("Mark a commit", commits, key="hist_at", allow_none=True,
                                           help="Draws a dashed line at this commit (the repository's git tags are "
                                           "marked in any case).")
        with m2:
            others = [m for m in data.machines(ctx.url)["name"] if m != ctx.machine]
            vs = widgets.url_selectbox("Overlay another machine", [None, *others], key="hist_vs",
                                       format_func=lambda m: "(none)" if m is None else m,
                                       help="The same series measured on another machine, at the commits both "
                                       "measured.")

flag = mine[mine["params_key"].isin(wanted)] if not mine.empty else mine
if not flag.empty:  # in the legend's order (numeric), not the listing's
    flag = flag.iloc[flag["params_key"].map({k: i for i, k in enumerate(wanted)}).argsort(kind="stable")]
pos_of_sha = dict(zip(commits["sha"], commits["pos"], strict=True))
start = 0  # position of the first commit drawn
if not whole:
    # An open flagged regression of these series stays in view, with ten commits before it for context.
    open_at = flag.loc[flag["category"].isin(["open", "suspect"]), "sha"].map(pos_of_sha).dropna() \
        if not flag.empty else pd.Series(dtype=float)
    start = max(0, min([len(commits) - WINDOW, *(int(p) - 10 for p in open_at)]))

# Read from ten commits before the first drawn one: the threshold bands look back five values.
hist = data.history(ctx.url, ctx.machine, bench, tuple(wanted),
                    tuple(int(c) for c in commits["commit_id"].iloc[max(0, start - 10):]) if start else None)
if hist.empty and start:  # retired series, measured only before the window: draw their whole history
    start = 0
    hist = data.history(ctx.url, ctx.machine, bench, tuple(wanted))
if hist.empty:
    st.info("No results for these series on this machine.")
    st.stop()
# Commit columns formatted once per commit, then mapped to the points of every series.
by_commit = commits.set_index("commit_id")
subjects = by_commit["message"].map(lambda m: fmt.subject(m, 48))
dates = by_commit["date"].dt.strftime("%Y-%m-%d %H:%M")
points = hist.assign(
    series=hist["params_key"].map(label_of),
    pos=hist["commit_id"].map(by_commit["pos"]),
    sha=hist["commit_id"].map(by_commit["sha"]),
    subject=hist["commit_id"].map(subjects),
    date=hist["commit_id"].map(dates),
    run_date=pd.to_datetime(hist["run_date"]).dt.strftime("%Y-%m-%d %H:%M"),
)
# Kernel configs and run versions are read and formatted only for the points drawn (the hover's).
window = tuple(int(c) for c in commits["commit_id"].iloc[start:]) if start else None
launch = data.launch_config(ctx.url, ctx.machine, bench, tuple(wanted), window)
if launch.empty:
    points["config"] = "not recorded by the suite"
else:
    # One row per point, one column per config key; configs repeat across commits, so each distinct one is
    # formatted once.
    wide = launch.pivot(index=["params_key", "commit_id"], columns="key", values="value")
    distinct = wide.groupby(list(wide.columns), dropna=False, sort=False).ngroup()
    first = ~distinct.duplicated()
    text = {g: fmt.launch_config(row.dropna().to_dict())
            for g, (_, row) in zip(distinct[first], wide[first].iterrows(), strict=True)}
    config = distinct.map(text).rename("config").reset_index()
    points = points.merge(config, on=["params_key", "commit_id"], how="left")
    points["config"] = points["config"].fillna("not recorded")
drawn = points["pos"] >= start
points["config"] = points["config"].where(drawn, "")
# Versions of each point's run (Run.info); runs stored before runs kept them show the machine's, marked so.
info = data.machine_info(ctx.url, ctx.machine)
run_info = data.run_infos(ctx.url, tuple(sorted(set(points.loc[drawn, "run_id"].astype(int)))))
machine_versions = fmt.versions(info)
fallback = f"{machine_versions} (the machine's, as of its newest run: this run did not record its own)" \
    if machine_versions else "not recorded"
versions = {run: fmt.versions(i) or fallback for run, i in run_info.items()}  # once per run, not per point
points["versions"] = points["run_id"].map(lambda r: versions.get(int(r), fallback)).where(drawn, "")
if vs:
    # The other machine's same series, at the commits this machine measured too (the x axis is this machine's).
    theirs = data.history(ctx.url, vs, bench, tuple(wanted))
    theirs = theirs.assign(pos=theirs["sha"].map(pos_of_sha)).dropna(subset=["pos"])
    theirs = theirs[theirs["pos"] >= start]
    if theirs.empty:
        st.caption(f"`{vs}` measured none of these series at the commits drawn.")
    else:
        points = pd.concat([points, theirs.assign(
            series=theirs["params_key"].map(label_of) + f" · {vs}", pos=theirs["pos"].astype(int),
            subject=theirs["commit_id"].map(subjects), date=theirs["commit_id"].map(dates),
            run_date=pd.to_datetime(theirs["run_date"]).dt.strftime("%Y-%m-%d %H:%M"),
            config="", versions=f"machine {vs}")[points.columns]], ignore_index=True)
order = {label_of[k]: i for i, k in enumerate(wanted)}
order.update({f"{label_of[k]} · {vs}": len(wanted) + i for i, k in enumerate(wanted)} if vs else {})
points = points.sort_values(["series", "pos"], key=lambda s: s.map(order) if s.name == "series" else s)

settings = data.settings()
threshold = settings.threshold_for(bench)
direction = direction_for(bench, unit, settings)

flagged = None
if not flag.empty:
    flagged = pd.DataFrame({
        "series": flag["params_key"].map(label_of),
        "pos": flag["sha"].map(pos_of_sha),
        "fixed_pos": flag["fixed_sha"].map(pos_of_sha),
        "text": [f"regression #{r.id} ({r.status}) at {fmt.commit_label(r.sha, r.message, 50)}"
                 for r in flag.itertuples()],
        "change": [f"{fmt.fmt_value(r.before, unit)} → {fmt.fmt_value(r.after, unit)} "
                   f"({fmt.fmt_ratio(r.ratio)}, p {fmt.fmt_p(r.p_value)})" for r in flag.itertuples()],
        "fixed_text": [f"#{r.id} fixed at {fmt.commit_label(r.fixed_sha, r.fixed_message, 50)}"
                       if isinstance(r.fixed_sha, str) else "" for r in flag.itertuples()],
    }).dropna(subset=["pos"])

fixed_params = frames.params_label(wanted[0], [n for n in pnames if n not in varying], only=True)
title = f"{bench} · {ctx.machine}" + (f" · {fixed_params}" if len(varying) < len(pnames) else "")
# Event markers: the repository's tags at commits of this machine, and the commit marked above.
events = [(int(pos_of_sha[sha]), ", ".join(names)) for sha, names in data.tags().items() if sha in pos_of_sha]
if marked:
    events.append((int(pos_of_sha[marked]), fmt.commit_label(marked, None)))
spec = charts.history_spec(points, title=title, unit=unit, commits=commits, threshold=threshold, flagged=flagged,
                           log_y=log_y, start=start, events=events)
st.vega_lite_chart(spec, width="stretch", key="hist_chart")
better = "lower" if direction == "up_is_worse" else "higher"
shown = f"The newest {len(commits) - start:,} of {fmt.plural(len(commits), 'commit')}" if start \
    else fmt.plural(len(commits), "commit")
st.caption(
    f"{shown} measured on `{ctx.machine}`, in history order"
    + (" (switch on Whole history to draw every commit)" if start else "") + f". {better.capitalize()} is better; "
    f"shaded: ±{threshold:.0%} around the median of the previous five values of the series bright in the legend "
    "(click another to shade it). asv environment: "
    + ", ".join(f"`{e}`" for e in sorted(hist["environment"].dropna().unique())) + ".",
    # The legend in full, shown on hover: a long caption is Markdown the browser lays out on every first render.
    help=f"Bars span the interquartile range. Shaded: ±{threshold:.0%} (this benchmark's threshold) around the median "
    "of the previous five values of one series (the first flagged one; click a series in the legend to shade it "
    "instead); a point past it on the worse side moved more than the threshold. Triangles: "
    "flagged regressions (the first bad commit); stars: the commit that fixed them; ✕ on the axis: failed runs; "
    "dotted lines: the benchmark's asv version changed (a new segment: no step is flagged across it). Drag to pan, "
    "scroll to zoom the commit axis, double-click to reset. Hover a point for its commit, its run, the kernel "
    "configuration the case ran with (where the suite records it) and the run's GPU, driver, CUDA, torch and "
    "triton (runs stored before mlaperf kept them per run show the machine's, marked so).",
)

if flag is not None and not flag.empty:
    st.subheader("Flagged regressions of these series")
    st.markdown(fmt.md_table(pd.DataFrame({
        "series": flag["params_key"].map(label_of),
        "status": flag["status"],
        "commits": [fmt.commit_range(p, s) for p, s in zip(flag["parent_sha"], flag["sha"], strict=True)],
        "before → after": [f"{fmt.fmt_value(b, unit)} → {fmt.fmt_value(a, unit)}"
                           for b, a in zip(flag["before"], flag["after"], strict=True)],
        "ratio": flag["ratio"].map(fmt.fmt_ratio),
        "p": flag["p_value"].map(fmt.fmt_p),
        "fixed at": [fmt.commit_label(s, m, 30) if isinstance(s, str) else ""
                     for s, m in zip(flag["fixed_sha"], flag["fixed_message"], strict=True)],
        "compare": [widgets.compare_link(ctx.machine, p, s) for p, s in zip(flag["parent_sha"], flag["sha"],
                                                                            strict=True)],
    }), links={"compare": "parent..commit"}))

drawn_commits = commits.iloc[start:]
values_box = widgets.url_expander(f"Values per commit ({fmt.plural(len(drawn_commits), 'commit')} drawn)",
                                  key="hist_values")
if values_box.open:
    wide = points.pivot_table(index="pos", columns="series", values="value", aggfunc="first")
    status = points.pivot_table(index="pos", columns="series", values="status", aggfunc="first")
    table = pd.DataFrame(index=drawn_commits["pos"])
    table["commit"] = drawn_commits["sha"].map(fmt.short_sha).to_numpy()
    table["subject"] = drawn_commits["message"].map(lambda m: fmt.subject(m, 50)).to_numpy()
    for label in [label_of[k] for k in wanted]:
        vals = wide[label].reindex(table.index) if label in wide else pd.Series(index=table.index, dtype=float)
        stat = status[label].reindex(table.index) if label in status else pd.Series(index=table.index, dtype=object)
        table[label] = [fmt.fmt_value(v, unit) if s == "ok" else ("failed" if s == "failed" else "not run")
                        for v, s in zip(vals, stat, strict=True)]
    config: dict[str, object] = {}
    if ctx.repo_url:
        table.insert(1, "link", [widgets.commit_url(ctx.repo_url, s) for s in drawn_commits["sha"]])
        config["link"] = st.column_config.LinkColumn("link", display_text="open")
    with values_box:
        st.dataframe(table.iloc[::-1], hide_index=True, width="stretch", column_config=config, height=320)
        st.caption("Newest first. \"not run\": the commit was measured on this machine without this case (asv "
                   "skipped it or was not asked for it); \"failed\": the case ran and failed.")
