"""Throughput vs concurrency: one line per implementation at a commit, an optional dashed baseline commit
(drawn only at the concurrencies it measured), and the speed-ups. The page's widgets over
``dashboard.suites`` and ``dashboard.throughput_model``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, frames, suites, widgets
from dashboard import throughput_model as model


def _baseline(ctx: widgets.Context, sha: str, base_sha: str | None) -> tuple[pd.DataFrame | None, str]:
    """The dashed curves' results and label: another machine's (at this commit, else its newest) when one is
    picked, else the baseline commit's, else none."""
    others = [m for m in data.machines(ctx.url)["name"] if m != ctx.machine]
    overlay = widgets.url_selectbox("Overlay another machine (dashed)", [None, *others], key="tp_vs",
                                    format_func=lambda m: "(none)" if m is None else m,
                                    help="The other machine's curves at the same commit where it measured it, "
                                    "else at its newest commit; it takes the dashed baseline's place.") \
        if others else None
    if overlay:
        at = model.overlay_commit(sha, list(data.commits(ctx.url, overlay)["sha"]))
        return data.results_at_commit(ctx.url, at, overlay), f"{overlay} @ {fmt.short_sha(at)}"
    if base_sha:
        return data.results_at_commit(ctx.url, base_sha, ctx.machine), fmt.short_sha(base_sha)
    return None, ""


def _speedups(cur_f: pd.DataFrame, base_f: pd.DataFrame | None, suite: suites.Suite, sha: str,
              base_label: str) -> None:
    """The speed-up tables as Markdown: a few rows, where a data grid would cost the browser its own code and
    canvas on the page's first render (``fmt.md_table``)."""
    speedups = suites.speedup_table(cur_f, suite.reference_line)
    if not speedups.empty:
        st.markdown(f"Speed-up over **{suite.reference_line}** at this commit")
        st.markdown(fmt.md_table(model.speedup_rows(speedups, suite.line_param)))
    if base_f is not None:
        ratios = suites.baseline_ratios(cur_f, base_f)
        if ratios.empty:
            st.caption("The baseline commit has no results for this suite at these settings.")
        else:
            st.markdown(f"Speed-up of `{fmt.short_sha(sha)}` over `{base_label}` (only concurrencies both measured)")
            st.markdown(fmt.md_table(model.baseline_rows(ratios, suite.line_param)))


def main() -> None:
    ctx = widgets.context()
    st.title("Throughput vs concurrency")
    commits = data.commits(ctx.url, ctx.machine)
    if commits.empty:
        st.info(f"No commits with results on machine `{ctx.machine}`.")
        widgets.stop()
    fullest, why = widgets.fullest_commit(ctx, commits)
    c1, c2 = st.columns(2)
    with c1:
        sha = widgets.commit_select("Commit", commits, key="tp_commit", default=fullest)
    with c2:
        base_sha = widgets.commit_select(
            "Baseline commit (dashed, optional)", commits, key="tp_base", allow_none=True,
            help="Overlay another commit's curves and show the speed-up of the chosen commit over it.",
        )
    widgets.opened_on(sha, fullest, why)
    results = data.results_at_commit(ctx.url, sha, ctx.machine)
    present = suites.present_suites(results["benchmark"].unique() if not results.empty else [])
    if not present:
        widgets.no_suites_note("throughput curve")
        if base_sha or st.query_params.get("tp_vs"):
            st.caption("The baseline commit and another machine's curves are drawn on the suites' throughput "
                       "curves only: the chart below shows this commit alone.")
        widgets.sweep_section(results, key="tp_sweep", title_suffix=f" @ {fmt.short_sha(sha)}")
        widgets.stop()
    baseline, base_label = _baseline(ctx, sha, base_sha)
    c1, c2 = st.columns([3, 1])
    by_key = {s.key: s for s in present}
    with c1:
        # One suite at a time: each chart costs the browser a draw.
        chosen = widgets.url_selectbox("Suite", list(by_key), key="tp_suite", format_func=lambda k: by_key[k].title)
    with c2:
        log_y = widgets.url_toggle("Logarithmic throughput axis", key="tp_logy", default=True)
    suite = by_key[chosen]
    cur = suites.throughput_frame(results, suite)
    if cur.empty:
        st.caption(f"No `{suite.time_bench}` or tokens/s results at this commit.")
        widgets.stop()
    values = frames.value_order(cur["filter"].dropna())
    cur_f, base_f, pick = cur, None, None
    if values:
        pick = widgets.url_radio(suite.filter_param, values, key=f"tp_{suite.key}_filter",
                                 default=suites.default_filter(suite, values), horizontal=True)
        cur_f = cur[cur["filter"] == pick]
    if baseline is not None:
        base_all = suites.throughput_frame(baseline, suite)
        base_f = base_all[base_all["filter"] == pick] if pick is not None else base_all
    title = f"{suite.title} · {ctx.machine}" + (f" · {suite.filter_param}={pick}" if pick is not None else "")
    spec = charts.throughput_spec(
        cur_f, title=title, line_label=suite.line_param, commit_label=fmt.short_sha(sha),
        baseline=base_f, baseline_label=base_label, log_y=log_y,
    )
    st.vega_lite_chart(spec, width="stretch", key=f"tp_{suite.key}_chart")
    note = " The baseline is drawn only at the concurrencies it measured." if base_f is not None else ""
    st.caption("tokens/s from " + " and ".join(f"`{s}`" for s in sorted(set(cur_f["source"])))
               + " (one token per request per step)." + note)
    _speedups(cur_f, base_f, suite, sha, base_label)


if __name__ == "__main__":
    main()
