"""What the static site (`mlaperf publish`) shows of one machine, read from the store and formatted here:
plain dicts and lists of JSON values, every displayed string already made, no HTML (``mlaperf.publish`` writes
them; the browser code in ``mlaperf/publish_site/`` only lays them out and scales the charts).

One rule, one place: the numbers are ``regressions.units``' (through ``dashboard.fmt``), the summary grid is
``dashboard.summary.grid``, the alert groups and their tables are ``dashboard.triage`` and
``dashboard.regressions_model``'s, the Overview's table ``dashboard.overview_model.alert_rows``, the throughput
curves, default filter and speed-ups ``dashboard.suites`` and ``dashboard.throughput_model``'s, the series'
histories ``mlaperf.publish_history``'s, the tables ``mlaperf.publish_tables``'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from dashboard import fmt, frames, overview_model, regressions_model, suites, summary, triage
from dashboard import throughput_model as tp_model
from db import queries
from regressions.config import Settings
from regressions.direction import direction_for

from .publish_axes import value_axis
from .publish_history import histories
from .publish_ids import series_id
from .publish_tables import table

TP_UNIT = "tokens/s"
EMAIL = re.compile(r"\s*<[^<>]*>\s*$")
# Sparkline values are drawn, not read: four significant digits are plenty and keep the files small.
SPARK_DIGITS = 4


@dataclass
class MachineSite:
    """One machine's pages: ``index`` (overview, alert groups, throughput) and one history per series id."""

    name: str
    index: dict[str, Any]
    histories: dict[str, dict[str, Any]] = field(default_factory=dict)  # by series_id


@dataclass(frozen=True)
class Links:
    """The site's links: pages of this machine (location hashes) and commits in the repository (if known)."""

    folder: str
    repo_url: str

    def history(self, sid: str) -> str:
        return f"#/{self.folder}/history/{sid}"

    def group(self, group: object) -> str:
        return f"#/{self.folder}/alerts?group={group}"

    def commit(self, sha: object, text: str) -> str | dict[str, str]:
        return {"text": text, "href": f"{self.repo_url}/commit/{sha}"} if self.repo_url and text else text

    def range(self, parent: object, sha: object, text: str) -> str | dict[str, str]:
        """A culprit range ``parent..sha`` as the repository's compare view (GitHub's ``compare/A...B``: every
        commit in it); the commit alone where there is no parent."""
        if not (self.repo_url and text and isinstance(parent, str) and parent):
            return self.commit(sha, text)
        return {"text": text, "href": f"{self.repo_url}/compare/{parent}...{sha}"}


def _commits(commits: pd.DataFrame, order: Mapping[int, int]) -> dict[str, list[Any]]:
    """Per commit: its SHA (links, ``?at=``), short SHA (axis labels), hover text (the whole message) and place
    among every machine's commits (``order``: commit id -> place, ``regressions.results.commit_positions``; a
    History overlay draws each machine at its own commits)."""
    dates = pd.to_datetime(commits["date"]).dt.strftime("%Y-%m-%d %H:%M").fillna("")
    # Authors by name: a published site (GitHub Pages) shows no e-mail address.
    authors = [EMAIL.sub("", a) if isinstance(a, str) else "" for a in commits["author"]]
    tips = [f"commit {fmt.short_sha(sha, 12)} · {d}" + (f" · {a}" if a else "")
            + (f"\n{m.strip()}" if isinstance(m, str) else "")
            for sha, d, a, m in zip(commits["sha"], dates, authors, commits["message"], strict=True)]
    return {"sha": [str(s) for s in commits["sha"]], "short": [fmt.short_sha(s) for s in commits["sha"]],
            "tip": tips, "order": [order[int(c)] for c in commits["commit_id"]]}


def _spark(values: Iterable[float | None]) -> list[float]:
    # Measured values only (None or NaN where a commit was not measured), as the dashboard's grid draws them.
    return [float(f"{v:.{SPARK_DIGITS}g}") for v in values if v is not None and v == v]


def grid_rows(grid: pd.DataFrame, names: pd.Series, threshold: Callable[[str], float]) -> list[dict[str, Any]]:
    """The summary grid (``summary.grid``; ``names``: one per row) as the dashboard's All benchmarks page shows it,
    live series first (``summary.live_first``), one dict per series (``id``: its ``series_id``), with the text the
    search matches (``summary.search_text``)."""
    names = names.set_axis(grid.index)
    grid = summary.live_first(grid)
    names = names.loc[grid.index]
    search = summary.search_text(grid).str.lower()
    latest = summary.latest_texts(grid)
    rows = []
    for i, r in enumerate(grid.itertuples()):
        change = None if r.change is None or r.change != r.change else float(r.change)  # NaN: no change yet
        limit = 1.0 + threshold(str(r.benchmark))
        tone = "" if change is None else "worse" if change > limit else "better" if change < 1 / limit else ""
        rows.append({"id": series_id(str(r.benchmark), str(r.params_key)), "name": names.iloc[i],
                     "latest": latest[i], "failing": bool(r.failing),
                     "spark": _spark(r.spark), "change": r.change_text,
                     "tone": tone, "flag": r.flag, "search": search.iloc[i]})
    return rows


def _metrics(groups: pd.DataFrame, n_commits: int, n_series: int, failing: int) -> list[list[str]]:
    """The Overview's counts, with its labels (the dashboard's Overview's)."""
    count = triage.counts(groups)
    return [[f"{count['open']:,}", "Open alert groups"], [f"{count['suspect']:,}", "Suspect"],
            [f"{count['fixed']:,}", "Fixed"], [f"{count['machine_wide']:,}", "Machine-wide"],
            [f"{failing:,}", "Failing series"], [f"{n_commits:,}", "Commits"], [f"{n_series:,}", "Series"]]


def group_pages(regs: pd.DataFrame, groups: pd.DataFrame, param_names: Mapping[str, list[str]],
                sid_of: Mapping[tuple[str, str], str], link: Links) -> list[dict[str, Any]]:
    """Every alert group (newest first) with its heading, commit range, culprit message and members' table
    (``regressions_model.group_rows`` and ``regression_rows``, their Compare links left out: no server)."""
    if groups.empty:
        return []
    named = regressions_model.with_names(regs, param_names)
    heads = regressions_model.group_rows(groups, all_machines=False, compare_link=lambda m, p, s: "")
    out = []
    for (_, g), (_, head) in zip(groups.iterrows(), heads.iterrows(), strict=True):
        members = named[named["group"] == g["group"]]
        rows = regressions_model.regression_rows(
            members, all_machines=False, compare_link=lambda m, p, s: "",
            history_link=lambda m, b, k: link.history(sid_of[(b, k)]) if (b, k) in sid_of else "")
        rows["commits"] = [link.range(p, s, text) for p, s, text in zip(members["parent_sha"], members["sha"],
                                                                         rows["commits"], strict=True)]
        out.append({
            "group": str(g["group"]), "category": str(g["category"]),
            "title": f"Group {head['group']}: {head['state']} · {fmt.plural(int(g['series']), 'series', 'series')}"
                     f" · worst {head['worst']}" + (f" · fixed at {head['fixed at']}" if head["fixed at"] else ""),
            "parent": link.commit(g["parent_sha"], head["parent (good)"]) if isinstance(g["parent_sha"], str)
            else head["parent (good)"],
            "head": link.commit(g["sha"], head["commit (first bad)"]),
            "message": str(g["message"] or "").strip(),
            "table": table(rows.drop(columns="compare"), {"history": "plot"}, shown_as=fmt.SHOWN_AS),
        })
    return out


def _throughput_filter(cur: pd.DataFrame, suite: suites.Suite, machine: str, pick: object) -> dict[str, Any]:
    """One chart of a suite at one filter value: its lines, axes, speed-up table and caption."""
    cur_f = cur[cur["filter"] == pick] if pick is not None else cur
    lines = list(pd.unique(cur_f["line"]))
    conc = sorted({float(c) for c in cur_f["concurrency"]})
    speedups = suites.speedup_table(cur_f, suite.reference_line)
    return {
        "value": "" if pick is None else str(pick),
        "title": f"{suite.title} · {machine}" + (f" · {suite.filter_param}={pick}" if pick is not None else ""),
        "lines": [{"name": str(line), "points": [
            [float(r.concurrency), float(r.tokens_per_s), f"{line} · concurrency {r.concurrency:g}\n"
             f"{fmt.fmt_value(r.tokens_per_s, TP_UNIT)}"] for r in cur_f[cur_f["line"] == line].itertuples()]}
            for line in lines],
        # Log, as the dashboard opens it (tp_logy): SIMT's 30k tokens/s read as a flat line at 0 under MMA's 2M.
        "y": value_axis(list(cur_f["tokens_per_s"]), TP_UNIT, si=True, title="throughput (tokens/s)", log=True),
        "x": {"ticks": conc, "labels": [f"{c:g}" for c in conc], "title": "concurrency (requests, log2)"},
        "speedup": None if speedups.empty else {
            "title": f"Speed-up over {suite.reference_line} at this commit",
            "table": table(tp_model.speedup_rows(speedups, suite.line_param))},
        "caption": "tokens/s from " + " and ".join(f"{s}" for s in sorted(set(cur_f["source"])))
                   + " (one token per request per step).",
    }


def throughput(s: Session, machine: str, sha: str) -> list[dict[str, Any]]:
    """The sparse-MLA suites' throughput curves at ``sha``, every filter value, the default one named (none
    without those suites)."""
    results = queries.results_at_commit(s, sha, machine)
    out = []
    for suite in suites.present_suites(results["benchmark"].unique() if not results.empty else []):
        cur = suites.throughput_frame(results, suite)
        if cur.empty:
            continue
        values = frames.value_order(cur["filter"].dropna())
        picks: list[object] = values or [None]
        default = suites.default_filter(suite, values) if values else None
        out.append({"key": suite.key, "filter_param": suite.filter_param,
                    "default": "" if default is None else str(default),
                    "filters": [_throughput_filter(cur, suite, machine, p) for p in picks]})
    return out


def series_ids(s: Session, machine: str) -> set[str]:
    """The ``series_id`` of every series ``machine`` measured (the same series on two machines: one id)."""
    series = queries.series(s, machine)
    return {series_id(str(b), str(k)) for b, k in zip(series["benchmark"], series["params_key"], strict=True)}


def machine_site(s: Session, machine: str, settings: Settings, link: Links, order: Mapping[int, int]) -> MachineSite:
    """Everything the site shows for ``machine`` (see the module docstring); ``order``: every commit's place in
    history (``regressions.results.commit_positions``, read once for every machine)."""
    commits = queries.commits(s, machine)
    # The dashboard's order (dashboard.data.series sorts the same way); the grid keeps it.
    series = frames.series_sort(queries.series(s, machine)).reset_index(drop=True)
    names = {str(n): list(p) if isinstance(p, list) else [] for n, p in
             zip(series["benchmark"], series["param_names"], strict=True)}
    regs = triage.regression_listing(s, machine)
    groups = triage.groups(regs)
    ids = tuple(int(c) for c in commits["commit_id"].iloc[-summary.SPARK:])
    recent = queries.recent_values(s, machine, ids)
    grid = summary.grid(series, recent, ids, regs, lambda b, u: direction_for(b, u, settings))
    # Throughput at the dashboard's commit: the newest with the fullest grid (``throughput_model``).
    fullest, why = tp_model.default_commit(commits, tp_model.grid_points(recent))
    sid_of = {(str(b), str(k)): series_id(str(b), str(k))
              for b, k in zip(series["benchmark"], series["params_key"], strict=True)}
    labels = summary.names(grid, names)
    top = summary.largest_first(grid).head(summary.LARGEST)
    at = fullest or (str(commits["sha"].iloc[-1]) if not commits.empty else "")
    message = commits.loc[commits["sha"].astype(str) == at, "message"]
    commit_json = _commits(commits, order)
    index = {
        "title": f"{machine}: performance overview", "versions": fmt.versions(queries.machine_info(s, machine)),
        "commits": commit_json,
        "metrics": _metrics(groups, len(commits), len(series), int((grid["failing"] > 0).sum())),
        "alerts": table(overview_model.alert_rows(groups, link.group), {"triage": "view group"}),
        "alerts_note": f"No regression has been flagged on {machine}." if groups.empty else
                       "Every alert group is closed (ignored, transient or retired).",
        "categories": [[c, f"{c} {n:,}"] for c, n in triage.counts(groups).items() if c in triage.CATEGORIES],
        "grid": grid_rows(grid, labels, settings.threshold_for),
        # The dashboard Overview's rows (``summary.largest_first``, its first ``LARGEST``): a regressed series was
        # row 14 of 930 in the site's grid, which is sorted by name (a review).
        "largest": [sid_of[(str(b), str(k))] for b, k in zip(top["benchmark"], top["params_key"], strict=True)],
        "grid_total": fmt.plural(len(series), "series", "series"),
        "groups": group_pages(regs, groups, names, sid_of, link),
        "throughput_at": link.commit(at, fmt.commit_label(at, message.iloc[0])) if at else "",
        "throughput_note": why or "the newest commit.",
        "throughput": throughput(s, machine, at) if at else [],
    }
    return MachineSite(machine, index, histories(s, machine, series, commits, regs, settings, list(labels),
                                                 commit_json["short"], link))
