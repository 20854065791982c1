"""The History page's model: which benchmark and series it opens on, which commits it draws, the points with
their hover text, the flagged regressions' markers and the tables. Pure pandas over the frames the loaders in
``dashboard.data`` return: no Streamlit, no database (``dashboard/views/history.py`` is the page)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from dashboard import fmt, frames, suites

MAX_SERIES = 12
# Characters of one parameter's pill text (values and their padding) that fit the width of a laptop's page.
PILLS_ONE_ROW = 100
# Commits drawn by default (the newest, and back to the oldest open flagged regression of the series drawn);
# "Whole history" draws every commit. Each point costs the browser time to draw: 100 commits (a quarter of
# nightlies) rather than 250 made History's first render 0.08 s quicker and 0.16 CPU s cheaper (4 series).
WINDOW = 100
UNRECORDED_SUITE = "not recorded by the suite"


def default_benchmark(names: Sequence[str], regs: pd.DataFrame) -> str:
    """The benchmark of the newest open (else suspect, else any) flagged regression, else the MLA decode
    timing, else the first name (``names`` sorted, not empty)."""
    flagged_first = [b for cat in ("open", "suspect") for b in regs.loc[regs["category"] == cat, "benchmark"]] \
        + list(regs["benchmark"]) if not regs.empty else []
    mla = [n for n in names if any(suites.matches(n, s.time_bench) for s in suites.SUITES)]
    return next((b for b in flagged_first if b in names), mla[0] if mla else names[0])


@dataclass(frozen=True)
class Params:
    """A benchmark's series: their params_keys, parameter names (declared, else read from the keys; only
    those some series has) and each key's parameters."""

    keys: list[str]
    names: list[str]
    parsed: dict[str, dict[str, object]]

    def values(self, name: str) -> list[object]:
        """Every value of parameter ``name`` among the series, in the selectors' numeric order."""
        return frames.value_order(p.get(name) for p in self.parsed.values())


def benchmark_params(rows: pd.DataFrame) -> Params:
    """The parameters of one benchmark's ``rows`` of ``data.series``."""
    keys = list(rows["params_key"])
    declared = rows["param_names"].iloc[0]
    names = [n for n in (declared if isinstance(declared, list) else []) if n] or frames.param_names(keys)
    parsed = {k: frames.params_dict(k) for k in keys}
    return Params(keys, [n for n in names if any(n in p for p in parsed.values())], parsed)


def default_picks(mine: pd.DataFrame, pnames: Sequence[str]) -> dict[str, list[object]]:
    """Selected values by default: the newest flagged series of this benchmark (``mine``, newest first),
    overlaid with the other series flagged at that commit along the parameter whose values differ most among
    them (at most four of its values, first and last included); {} without flags."""
    if mine.empty:
        return {}
    at = [frames.params_dict(k) for k in mine.loc[mine["sha"] == mine["sha"].iloc[0], "params_key"]]
    sweep = max(pnames, key=lambda n: len({str(p.get(n)) for p in at}), default=None)
    first = at[0]
    same = [p for p in at if all(p.get(n) == first.get(n) for n in pnames if n != sweep)]
    defaults = {n: [first.get(n)] for n in pnames if n != sweep}
    if sweep is not None:
        values = frames.value_order(p.get(sweep) for p in same)
        defaults[sweep] = [values[round(i * (len(values) - 1) / 3)] for i in range(4)] if len(values) > 4 \
            else values
    return defaults


def pill_default(defaults: Mapping[str, list[object]], name: str, index: int, values: list[object],
                 n_params: int) -> list[object]:
    """A parameter's selected values by default: the flagged ones, else every value of the first parameter
    (implementations, when there are others) and the first value of the others."""
    return defaults.get(name) or (values if index == 0 and n_params > 1 else values[:1])


@dataclass(frozen=True)
class Selection:
    """The series drawn, in legend order; the parameters that vary among them (their labels' parts); each
    one's label; how many were picked before the cap of ``MAX_SERIES``."""

    wanted: list[str]
    varying: list[str]
    label_of: dict[str, str]
    picked: int


def select_series(params: Params, picked: Mapping[str, Sequence[object]], bench: str = "value") -> Selection:
    """The series whose every parameter is among the ``picked`` values (the first ``MAX_SERIES`` in the
    selectors' numeric order), labelled by the parameters that differ between them; a benchmark without
    parameters by its name without its module (``bench``: its asv name), which stays apart from another machine's
    line and reads in the flagged table (it read "value", a review on Jaxion's history)."""
    pnames, parsed = params.names, params.parsed
    wanted = [k for k in params.keys if all(parsed[k].get(n) in picked[n] for n in pnames)] if pnames \
        else list(params.keys)
    n_picked = len(wanted)
    if n_picked > MAX_SERIES:
        # "first" in the selectors' numeric order, not the params_key text order ("1", "128", "16", "64")
        wanted = sorted(wanted, key=lambda k: [frames.rank(parsed[k].get(n)) for n in pnames])[:MAX_SERIES]
    varying = [n for n in pnames if len({parsed[k].get(n) for k in wanted}) > 1] or list(pnames)
    plain = bench[len(fmt.module_of(bench)):]
    label_of = {k: frames.params_label(k, varying, only=True) or plain for k in wanted}
    wanted = sorted(wanted, key=lambda k: [frames.rank(parsed[k].get(n)) for n in varying])
    return Selection(wanted, varying, label_of, n_picked)


def flagged_of(mine: pd.DataFrame, wanted: Sequence[str]) -> pd.DataFrame:
    """The flagged regressions of the series drawn, in the legend's order (numeric), not the listing's."""
    flag = mine[mine["params_key"].isin(wanted)] if not mine.empty else mine
    if not flag.empty:
        flag = flag.iloc[flag["params_key"].map({k: i for i, k in enumerate(wanted)}).argsort(kind="stable")]
    return flag


def window_start(commits: pd.DataFrame, flag: pd.DataFrame, *, whole: bool) -> int:
    """Position of the first commit drawn: 0 for the whole history, else the newest ``WINDOW`` commits, back
    to ten commits before the oldest open flagged regression of the series drawn."""
    if whole:
        return 0
    pos_of_sha = dict(zip(commits["sha"], commits["pos"], strict=True))
    open_at = flag.loc[flag["category"].isin(["open", "suspect"]), "sha"].map(pos_of_sha).dropna() \
        if not flag.empty else pd.Series(dtype=float)
    return max(0, min([len(commits) - WINDOW, *(int(p) - 10 for p in open_at)]))


def first_drawn(points: pd.DataFrame, start: int, marked: int | None = None) -> tuple[int, bool]:
    """The chart's first commit: ``start``, or the first commit with a result of the series drawn where they began
    later (OpenBLAS's renamed gemm: 44 results at the newest of 92 commits drew an empty left half), never past the
    ``marked`` commit's position (its dashed line stays); and whether results before it are left out (the window
    cut them: Whole history draws them)."""
    first = int(points["pos"].min()) if not points.empty else start
    shown = max(start, first)
    return (min(shown, marked) if marked is not None and marked >= start else shown), first < start


def commit_ids_from(commits: pd.DataFrame, start: int) -> tuple[int, ...] | None:
    """The commit ids from position ``start`` (None: every commit)."""
    return tuple(int(c) for c in commits["commit_id"].iloc[start:]) if start else None


def _commit_text(commits: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Commits by id, with their subjects and dates formatted once per commit."""
    by_commit = commits.set_index("commit_id")
    # The whole subject line on hover (up to 160 characters); the page's table and the site give the message.
    return (by_commit, by_commit["message"].map(lambda m: fmt.subject(m, 160)),
            by_commit["date"].dt.strftime("%Y-%m-%d %H:%M"))


def points_of(hist: pd.DataFrame, commits: pd.DataFrame, label_of: Mapping[str, str]) -> pd.DataFrame:
    """``data.history`` rows with their series label, commit position and the commit's hover columns."""
    by_commit, subjects, dates = _commit_text(commits)
    return hist.assign(
        series=hist["params_key"].map(label_of),
        pos=hist["commit_id"].map(by_commit["pos"]),
        sha=hist["commit_id"].map(by_commit["sha"]),
        subject=hist["commit_id"].map(subjects),
        date=hist["commit_id"].map(dates),
        run_date=pd.to_datetime(hist["run_date"]).dt.strftime("%Y-%m-%d %H:%M"),
    )


def with_configs(points: pd.DataFrame, launch: pd.DataFrame, start: int) -> pd.DataFrame:
    """``points`` with a ``config`` column: the kernel configuration each case ran with (``launch``: one row
    per key of ``data.launch_config``), blank before ``start``."""
    if launch.empty:
        points = points.assign(config=UNRECORDED_SUITE)
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
    points["config"] = points["config"].where(points["pos"] >= start, "")
    return points


def drawn_run_ids(points: pd.DataFrame, start: int) -> tuple[int, ...]:
    """The runs of the points drawn, for ``data.run_infos``."""
    return tuple(sorted(set(points.loc[points["pos"] >= start, "run_id"].astype(int))))


def with_versions(points: pd.DataFrame, run_info: Mapping[int, Mapping[str, object]],
                  machine_info: Mapping[str, object], start: int) -> pd.DataFrame:
    """``points`` with a ``versions`` column: each point's run's GPU and versions (Run.info); runs stored
    before runs kept them show the machine's, marked so. Blank before ``start``."""
    machine_versions = fmt.versions(machine_info)
    fallback = f"{machine_versions} (the machine's, as of its newest run: this run did not record its own)" \
        if machine_versions else "not recorded"
    versions = {run: fmt.versions(i) or fallback for run, i in run_info.items()}  # once per run, not per point
    return points.assign(versions=points["run_id"].map(lambda r: versions.get(int(r), fallback))
                         .where(points["pos"] >= start, ""))


def overlay(points: pd.DataFrame, theirs: pd.DataFrame, commits: pd.DataFrame, label_of: Mapping[str, str],
            vs: str, start: int) -> pd.DataFrame | None:
    """``points`` with machine ``vs``'s same series (``theirs``) at their commits from ``start`` (``commits``: the
    axis, every overlaid machine's commits, ``data.commits_on``); None when ``vs`` measured none of them there."""
    by_commit, subjects, dates = _commit_text(commits)
    pos_of_sha = dict(zip(commits["sha"], commits["pos"], strict=True))
    theirs = theirs.assign(pos=theirs["sha"].map(pos_of_sha)).dropna(subset=["pos"])
    theirs = theirs[theirs["pos"] >= start]
    if theirs.empty:
        return None
    return pd.concat([points, theirs.assign(
        series=theirs["params_key"].map(label_of) + f" · {vs}", pos=theirs["pos"].astype(int),
        subject=theirs["commit_id"].map(subjects), date=theirs["commit_id"].map(dates),
        run_date=pd.to_datetime(theirs["run_date"]).dt.strftime("%Y-%m-%d %H:%M"),
        config="", versions=f"machine {vs}")[points.columns]], ignore_index=True)


def in_legend_order(points: pd.DataFrame, sel: Selection, vs: Sequence[str] = ()) -> pd.DataFrame:
    """``points`` sorted by series (this machine's in legend order, then each overlaid machine's of ``vs``, in
    turn) and position."""
    order = {sel.label_of[k]: i for i, k in enumerate(sel.wanted)}
    for j, other in enumerate(vs, start=1):
        order.update({f"{sel.label_of[k]} · {other}": j * len(sel.wanted) + i for i, k in enumerate(sel.wanted)})
    return points.sort_values(["series", "pos"], key=lambda s: s.map(order) if s.name == "series" else s)


def flagged_markers(flag: pd.DataFrame, commits: pd.DataFrame, label_of: Mapping[str, str],
                    unit: str | None) -> pd.DataFrame | None:
    """The chart's markers of flagged regressions and their fixes (``history_chart.history_spec``'s
    ``flagged``); None without any."""
    if flag.empty:
        return None
    pos_of_sha = dict(zip(commits["sha"], commits["pos"], strict=True))
    return pd.DataFrame({
        "series": flag["params_key"].map(label_of),
        "pos": flag["sha"].map(pos_of_sha),
        "fixed_pos": flag["fixed_sha"].map(pos_of_sha),
        "text": [f"regression #{r.id} ({r.status}) at {fmt.commit_label(r.sha, r.message, 50)}"
                 for r in flag.itertuples()],
        "change": [f"{fmt.fmt_before_after(r.before, r.after, unit)} "
                   f"({fmt.fmt_ratio(r.ratio)}, p {fmt.fmt_p(r.p_value)})" for r in flag.itertuples()],
        "fixed_text": [f"#{r.id} fixed at {fmt.commit_label(r.fixed_sha, r.fixed_message, 50)}"
                       if isinstance(r.fixed_sha, str) else "" for r in flag.itertuples()],
    }).dropna(subset=["pos"])


def chart_title(bench: str, machine: str, params: Params, sel: Selection) -> str:
    """Benchmark, machine, and the parameters every series drawn shares."""
    fixed_params = frames.params_label(sel.wanted[0], [n for n in params.names if n not in sel.varying], only=True)
    return f"{bench} · {machine}" + (f" · {fixed_params}" if len(sel.varying) < len(params.names) else "")


def events(tags: Mapping[str, Iterable[str]], commits: pd.DataFrame, marked: str | None) -> list[tuple[int, str]]:
    """Event markers: the repository's tags at commits of this machine, and the ``marked`` commit."""
    pos_of_sha = dict(zip(commits["sha"], commits["pos"], strict=True))
    out = [(int(pos_of_sha[sha]), ", ".join(names)) for sha, names in tags.items() if sha in pos_of_sha]
    if marked:
        out.append((int(pos_of_sha[marked]), fmt.commit_label(marked, None)))
    return out


def ran_at(points: pd.DataFrame, start: int) -> tuple[int, int]:
    """Of the commits drawn (positions from ``start``), how many the series drawn ran at (a value) and how many
    more they only failed at: the machine's commits are the axis, not the series' results (a series of 33 values
    and 18 failures read "51 commits measured", a review on Jaxion's history)."""
    shown = points[points["pos"] >= start]
    ok = set(shown.loc[shown["status"] == "ok", "pos"])
    return len(ok), len(set(shown.loc[shown["status"] == "failed", "pos"]) - ok)


def caption(commits: pd.DataFrame, start: int, machine: str, *, lower_is_better: bool, threshold: float,
            environments: Iterable[str], overlaid: Sequence[str] = (), ran: tuple[int, int] | None = None,
            cut: bool = True) -> str:
    """The line under the chart: what is drawn (``commits``: those of ``machine`` and the ``overlaid`` machines,
    from ``start``; ``ran``: :func:`ran_at`; ``cut``: older results left out, see :func:`first_drawn`), which way
    is better, the band, the asv environments."""
    shown = f"The newest {len(commits) - start:,} of {fmt.plural(len(commits), 'commit')}" if start \
        else fmt.plural(len(commits), "commit")
    better = "lower" if lower_is_better else "higher"
    where = f"`{machine}`" + "".join(f" or `{m}`" for m in overlaid)
    measured = "" if ran is None else f"; the series drawn ran at {ran[0]:,}" + (f" and failed at {ran[1]:,} more"
                                                                              if ran[1] else "")
    return (f"{shown} measured on {where}, in history order"
            + (" (switch on Whole history to draw every commit)" if start and cut else "") + f"{measured}. "
            f"{better.capitalize()} is "
            f"better; shaded: ±{fmt.fmt_percent(threshold)} around the median of the previous five values (of its "
            "benchmark version) of the series bright in the legend (click another to shade it). asv environment: "
            + ", ".join(f"`{e}`" for e in sorted(environments)) + ".")


def legend_help(threshold: float) -> str:
    """The chart's legend in full (shown on hover: a long caption is Markdown the browser lays out on every
    first render)."""
    return (f"Bars span the interquartile range. Shaded: ±{fmt.fmt_percent(threshold)} (this benchmark's threshold) "
            "around the median of the previous five values of one series, of the same benchmark version (the first "
            "flagged one; click a series in the legend to shade it instead); a point past it on the worse side moved "
            "more than the threshold. Triangles: "
            "flagged regressions (the first bad commit); stars: the commit that fixed them; ✕ on the axis: failed "
            "runs; dotted lines: the benchmark's asv version changed (a new segment: no step is flagged across it). "
            "Drag to pan, scroll to zoom the commit axis, double-click to reset. Hover a point for its commit, its "
            "run, the kernel configuration the case ran with (where the suite records it) and the run's GPU, "
            "driver, CUDA, torch and triton (runs stored before mlaperf kept them per run show the machine's, "
            "marked so).")


def flagged_table(flag: pd.DataFrame, label_of: Mapping[str, str], unit: str | None) -> pd.DataFrame:
    """The flagged regressions of the series drawn, one row each."""
    return pd.DataFrame({
        "series": flag["params_key"].map(label_of),
        "status": flag["status"],
        "commits": [fmt.commit_range(p, s) for p, s in zip(flag["parent_sha"], flag["sha"], strict=True)],
        "before → after": [fmt.fmt_before_after(b, a, unit)
                           for b, a in zip(flag["before"], flag["after"], strict=True)],
        "ratio": flag["ratio"].map(fmt.fmt_ratio),
        "p": flag["p_value"].map(fmt.fmt_p),
        "fixed at": [fmt.commit_label(s, m, 30) if isinstance(s, str) else ""
                     for s, m in zip(flag["fixed_sha"], flag["fixed_message"], strict=True)],
    })


def compare_pairs(flag: pd.DataFrame) -> list[tuple[str | None, str]]:
    """(parent, commit) of each flagged step, once each (series flagged together share their step)."""
    return list(dict.fromkeys(zip(flag["parent_sha"], flag["sha"], strict=True)))


def values_table(points: pd.DataFrame, drawn_commits: pd.DataFrame, labels: Sequence[str],
                 unit: str | None) -> pd.DataFrame:
    """One row per commit drawn (oldest first), one column per series label: its value, "failed" or
    "not run"."""
    wide = points.pivot_table(index="pos", columns="series", values="value", aggfunc="first")
    status = points.pivot_table(index="pos", columns="series", values="status", aggfunc="first")
    table = pd.DataFrame(index=drawn_commits["pos"])
    table["commit"] = drawn_commits["sha"].map(fmt.short_sha).to_numpy()
    table["subject"] = drawn_commits["message"].map(lambda m: fmt.subject(m, 50)).to_numpy()
    for label in labels:
        vals = wide[label].reindex(table.index) if label in wide else pd.Series(index=table.index, dtype=float)
        stat = status[label].reindex(table.index) if label in status else pd.Series(index=table.index, dtype=object)
        table[label] = [fmt.fmt_value(v, unit) if s == "ok" else ("failed" if s == "failed" else "not run")
                        for v, s in zip(vals, stat, strict=True)]
    return table
