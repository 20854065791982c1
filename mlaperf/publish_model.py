"""What the static site (`mlaperf publish`) shows, read from the store: plain dicts and lists of JSON values,
no files, no HTML (``mlaperf.publish`` writes them; the browser code in ``mlaperf/publish_site/`` draws them).

Per machine: its commits (history order), every series with a sparkline of its newest values and its latest
change, every series' whole history with its flagged regressions and their fixes, the throughput curves of
the sparse-MLA suites at the newest commit, and the alert groups (every status, closed ones included). The
rules are the dashboard's: series and histories from ``db.queries`` (a commit's runs pooled), alert groups
from ``dashboard.triage``, throughput from ``dashboard.suites``, directions and thresholds from the
configuration (``regressions.config``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from dashboard import frames, suites, triage
from dashboard.summary import SPARK, latest_change
from db import queries
from regressions.config import Settings
from regressions.direction import direction_for


@dataclass
class MachineSite:
    """One machine's pages: ``index`` (commits, series, groups, throughput) and one history per series id."""

    name: str
    index: dict[str, Any]
    histories: dict[int, dict[str, Any]] = field(default_factory=dict)


def _num(value: Any) -> float | None:
    """A JSON number (None for a missing or non-finite value)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _commits(s: Session, machine: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    commits = queries.commits(s, machine)
    out = {
        "sha": list(commits["sha"].astype(str)),
        "date": list(pd.to_datetime(commits["date"]).dt.strftime("%Y-%m-%d %H:%M").fillna("")),
        "message": [m if isinstance(m, str) else "" for m in commits["message"]],
        "author": [a if isinstance(a, str) else "" for a in commits["author"]],
    }
    return commits, out


def _histories(s: Session, machine: str, series: pd.DataFrame, pos_of: dict[int, int]) -> dict[int, dict[str, Any]]:
    """Series id -> {pos, value (None: no value), failed (positions), version_changes (positions)}: one entry
    per commit the series has a result at (positions in the machine's commits)."""
    out: dict[int, dict[str, Any]] = {}
    for bench, rows in series.groupby("benchmark", sort=False):
        hist = queries.history(s, str(bench), list(rows["params_key"]), machine)
        if hist.empty:
            continue
        sid_of = dict(zip(rows["params_key"], rows.index, strict=True))
        for key, h in hist.groupby("params_key", sort=False):
            values = h["value"].to_numpy(dtype=float)
            pos = [pos_of[int(c)] for c in h["commit_id"]]
            versions = list(h["benchmark_version"])
            out[int(sid_of[key])] = {
                "pos": pos,
                "value": [float(f"{v:.5g}") if math.isfinite(v) else None for v in values],
                "failed": [p for p, st in zip(pos, h["status"], strict=True) if st == "failed"],
                # Where the benchmark's asv version changed (a new segment), not the version of every point.
                "version_changes": [p for i, p in enumerate(pos) if i and versions[i] != versions[i - 1]],
            }
    return out


def _flags(regs: pd.DataFrame, sid_of: dict[tuple[str, str], int]) -> pd.DataFrame:
    """The regression rows with their series id and commit positions (rows of other series dropped)."""
    if regs.empty:
        return regs.assign(sid=pd.Series(dtype=int))
    sid = [sid_of.get((b, k)) for b, k in zip(regs["benchmark"], regs["params_key"], strict=True)]
    out = regs.assign(sid=sid)
    return out[out["sid"].notna()].assign(sid=lambda f: f["sid"].astype(int))


def _regression_json(r: Any, pos_of_sha: dict[str, int]) -> dict[str, Any]:
    labels = r.labels if isinstance(r.labels, list) else []
    return {
        "id": int(r.id), "series": int(r.sid), "status": str(r.status), "category": str(r.category),
        "group": int(r.group), "pos": pos_of_sha.get(r.sha), "parent_pos": pos_of_sha.get(r.parent_sha),
        "fixed_pos": pos_of_sha.get(r.fixed_sha), "before": _num(r.before), "after": _num(r.after),
        "ratio": _num(r.ratio), "direction": str(r.direction), "p": _num(r.p_value), "labels": labels,
        "note": str(r.note or ""),
    }


def _groups(regs: pd.DataFrame, pos_of_sha: dict[str, int]) -> list[dict[str, Any]]:
    groups = triage.groups(regs)
    members = regs.groupby("group")["id"].apply(list).to_dict() if not regs.empty else {}
    return [{
        "group": int(g.group), "status": str(g.group_status), "category": str(g.category),
        "pos": pos_of_sha.get(g.sha), "parent_pos": pos_of_sha.get(g.parent_sha) if isinstance(g.parent_sha, str)
        else None, "series": int(g.series), "worst": _num(g.worst), "statuses": str(g.statuses),
        "machine_wide": bool(g.machine_wide), "fixed_at": str(g.fixed_at), "benchmarks": list(g.benchmarks),
        "members": [int(i) for i in members.get(g.group, [])],
    } for g in groups.itertuples()]


def _throughput(s: Session, machine: str, sha: str) -> list[dict[str, Any]]:
    """The sparse-MLA suites' tokens/s per line and concurrency at ``sha`` (none without those suites)."""
    results = queries.results_at_commit(s, sha, machine)
    out = []
    for suite in suites.present_suites(results["benchmark"].unique() if not results.empty else []):
        tp = suites.throughput_frame(results, suite)
        if tp.empty:
            continue
        out.append({
            "key": suite.key, "title": suite.title, "line_param": suite.line_param,
            "filter_param": suite.filter_param, "reference": suite.reference_line,
            "rows": [{"line": str(r.line), "concurrency": _num(r.concurrency),
                      "filter": None if r.filter is None or (isinstance(r.filter, float) and math.isnan(r.filter))
                      else str(r.filter), "value": _num(r.tokens_per_s)} for r in tp.itertuples()],
        })
    return out


def machine_site(s: Session, machine: str, settings: Settings) -> MachineSite:
    """Everything the site shows for ``machine`` (see the module docstring)."""
    commits, commit_json = _commits(s, machine)
    series = queries.series(s, machine).reset_index(drop=True)
    names = {str(n): list(p) if isinstance(p, list) else [] for n, p in
             zip(series["benchmark"], series["param_names"], strict=True)}
    pos_of = dict(zip(commits["commit_id"].astype(int), commits["pos"].astype(int), strict=True))
    pos_of_sha = dict(zip(commits["sha"].astype(str), commits["pos"].astype(int), strict=True))
    histories = _histories(s, machine, series, pos_of)
    regs = triage.regression_listing(s, machine)
    sid_of = {(b, k): i for i, (b, k) in enumerate(zip(series["benchmark"], series["params_key"], strict=True))}
    flags = _flags(regs, sid_of)
    reg_json = [_regression_json(r, pos_of_sha) for r in flags.itertuples()]
    latest_flag: dict[int, dict[str, Any]] = {}
    for r in reg_json:  # newest commit first: the first seen per series is its latest
        latest_flag.setdefault(r["series"], r)
    rows = []
    for sid, r in enumerate(series.itertuples()):
        unit = _text(r.unit)
        direction = direction_for(str(r.benchmark), unit, settings)
        h = histories.get(sid, {"pos": [], "value": []})
        values = h["value"]
        known = [(p, v) for p, v in zip(h["pos"], values, strict=True) if v is not None]
        rows.append({
            "id": sid, "benchmark": str(r.benchmark),
            "params": frames.params_label(r.params_key, names.get(r.benchmark)),
            "unit": unit, "direction": direction, "threshold": settings.threshold_for(str(r.benchmark)),
            "last": known[-1][1] if known else None, "last_pos": known[-1][0] if known else None,
            "change": latest_change(values, direction), "spark": values[-SPARK:],
            "flag": latest_flag.get(sid),
        })
    throughput = _throughput(s, machine, str(commits["sha"].iloc[-1])) if not commits.empty else []
    index = {"machine": machine, "info": _machine_info(s, machine), "commits": commit_json, "series": rows,
             "regressions": reg_json, "groups": _groups(regs, pos_of_sha), "throughput": throughput}
    return MachineSite(machine, index, histories)


def _machine_info(s: Session, machine: str) -> dict[str, str]:
    from dashboard import fmt

    info = queries.machine_info(s, machine)
    return {"versions": fmt.versions(info), "gpu": str(info.get("gpu_name") or "")}
