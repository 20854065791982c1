"""The report of the real-noise detection benchmark (benchmarks/scripts/detect_real.py): its goals, the
markdown table with its notes, and the JSON document."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from benchmarks.scripts.detect_real_cases import CaseTally
from benchmarks.scripts.detect_real_cases import rows as case_rows
from benchmarks.scripts.detect_real_cases import to_json as cases_json
from benchmarks.scripts.detect_real_model import (
    BUCKETS,
    GOAL_FA,
    GOAL_RECALL,
    METHODS,
    EventResult,
    MethodReport,
    Options,
    StepTally,
    bucket_label,
)

# The table's definitions, printed under it (docs/detection.md says the same).
NOTES = (
    "Open: mlaperf status suspect, new or acknowledged (closed: transient, fixed, retired); asv lists only steps",
    "that still explain its latest value, so what it lists is open. A false alarm is a flag on a flat series",
    "more than one commit from that series' injected step (or on a series without one), listed by the first",
    "detection and still open after one more run; 'raised' counts every such flag, open or closed then.",
    "Machine-wide events count flags at the event commit that the unmodified history does not have there;",
    "'groups' counts alert groups with an open member (asv: machine x commit with a flag).",
)


def _pct(num: int, den: int) -> str:
    return f"{num / den:.0%} ({num}/{den})" if den else "n/a"


def _events(report: MethodReport, where: str) -> list[EventResult]:
    return [e for e in report.events if e.where == where]


def goals(report: MethodReport) -> list[dict[str, Any]]:
    t = report.steps
    found, total = t.recall(1)
    recall = found / total if total else math.nan
    fa = t.fa_rate()
    out = [
        {
            "goal": "recall >= 95% for steps >= 7% with <= 2 false alarms per 90 series x 76 commits",
            "value": f"recall {recall:.1%}, {fa:.2f} false alarms",
            "pass": bool(recall >= GOAL_RECALL and fa <= GOAL_FA),
        }
    ]
    inside = _events(report, "inside")
    bad = [e for e in inside if e.open > 0]
    out.append(
        {
            "goal": "machine-wide one-run event inside the history: 0 open alerts",
            "value": f"{len(inside) - len(bad)}/{len(inside)} events without open alerts"
            + (f" (worst: {max(e.open for e in bad)} open alerts)" if bad else ""),
            "pass": bool(inside) and not bad,
        }
    )
    newest = _events(report, "newest")
    one = sum(e.groups == 1 and e.flags > 0 and set(e.statuses) == {"suspect"} for e in newest)
    # After the next clean run nothing is open: transient, or fixed where a real short level sits there.
    gone = sum(e.after_open == 0 and e.after_statuses is not None and e.flags > 0 for e in newest)
    out.append(
        {
            "goal": "machine-wide one-run event at the newest commit: 1 group, suspect, then 0 open alerts",
            "value": f"{one}/{len(newest)} events one suspect group; {gone}/{len(newest)} none open after the next run",
            "pass": bool(newest) and one == len(newest) and gone == len(newest),
        }
    )
    return out


def _status_text(counts: Counter | dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"


def _event_row(events: list[EventResult], method: str, what: str) -> str:
    if not events:
        return "n/a"
    if what == "open":
        hit = [e for e in events if e.open]
        return f"{len(events) - len(hit)}/{len(events)} events none" + (
            f"; {sum(e.open for e in hit)} open in {len(hit)}" if hit else ""
        )
    if what == "groups":
        g = [e.open_groups for e in events]
        return f"{sum(g)} open in {len(events)} events (max {max(g)}); {sum(e.groups for e in events)} raised"
    if what == "newest":
        flagged = sum(e.flags > 0 for e in events)
        parts = [f"{flagged}/{len(events)} flagged ({sum(e.flags for e in events)} flags)"]
        parts.append(f"{sum(e.groups == 1 for e in events)}/{len(events)} one group")
        if method == "mlaperf":
            st: Counter = Counter()
            for e in events:
                st.update(e.statuses)
            parts.append(_status_text(st))
            parts.append(f"machine-wide {sum(bool(e.machine_wide) for e in events)}")
        return "; ".join(parts)
    # after the next run
    open_after = sum(e.after_open or 0 for e in events)
    if method == "mlaperf":
        st = Counter()
        for e in events:
            st.update(e.after_statuses or {})
        return f"{sum(e.after_open == 0 for e in events)}/{len(events)} events no open alert; {_status_text(st)}"
    return f"{sum(e.after_flags == 0 for e in events)}/{len(events)} events no flag; {open_after} flags"


def _confirmed_cell(t: StepTally, method: str) -> str:
    if method == "mlaperf":
        return f"{_pct(t.confirmed, t.confirmed_of)} new ({_status_text(t.confirmed_statuses)})"
    return f"{_pct(t.confirmed, t.confirmed_of)} still flagged"


def _event_and_case_rows(reports: dict[str, MethodReport], cases: CaseTally) -> list[tuple[str, list[str]]]:
    """The table rows of the machine-wide events and of issue 27's cases."""
    out = [
        (name, [_event_row(_events(reports[m], where), m, what) for m in METHODS])
        for name, where, what in (
            ("machine-wide event inside: open alerts", "inside", "open"),
            ("machine-wide event inside: groups", "inside", "groups"),
            ("machine-wide event at the newest commit", "newest", "newest"),
            ("  after one more clean run", "newest", "after"),
        )
    ]
    return out + case_rows(cases, METHODS)


def render(summary: dict[str, Any], reports: dict[str, MethodReport], opts: Options, cases: CaseTally) -> str:
    lines = [
        f"Detection on real noise: {summary['datasets_text']}; seed {opts.seed}, {opts.rounds} round(s), "
        f"threshold {opts.threshold:.0%}; mlaperf detector at {summary['revision']}",
        "",
        "| | " + " | ".join(METHODS) + " |",
        "| --- | " + " | ".join("---" for _ in METHODS) + " |",
    ]

    def row(name: str, cells: Iterable[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    for k in range(len(BUCKETS)):
        cells = (_pct(reports[m].steps.found[k], reports[m].steps.total[k]) for m in METHODS)
        row(f"recall, steps {bucket_label(k)}", cells)
    row("recall, steps >= 7%", (_pct(*reports[m].steps.recall(1)) for m in METHODS))
    row(
        "  of which at the newest commit",
        (_pct(reports[m].steps.newest_found, reports[m].steps.newest_total) for m in METHODS),
    )
    row(
        "found at the exact commit",
        (_pct(reports[m].steps.exact, sum(reports[m].steps.found)) for m in METHODS),
    )
    row(
        "false alarms per 90 series x 76 commits",
        (
            f"{reports[m].steps.fa_rate():.2f} ({reports[m].steps.false_alarms} in "
            f"{reports[m].steps.series_commits:,} series-commits)"
            for m in METHODS
        ),
    )
    row(
        "  most at one machine x commit",
        (
            ", ".join(f"{n} at {where} {c}" for (where, c), n in reports[m].steps.alarm_commits.most_common(1))
            or "none"
            for m in METHODS
        ),
    )
    row(
        "  raised, counting those closed after one more run",
        (
            f"{reports[m].steps.fa_rate(raised=True):.2f} ({reports[m].steps.raised}; after one more run: "
            f"{_status_text(reports[m].steps.raised_after)})"
            for m in METHODS
        ),
    )
    step_commits = reports[METHODS[0]].steps.step_commits
    row(
        f"alert groups (steps at {step_commits} machine x commit)",
        (str(reports[m].steps.groups) for m in METHODS),
    )
    row("newest-commit steps >= 7% after one more run", (_confirmed_cell(reports[m].steps, m) for m in METHODS))
    row(
        "open flags on the unmodified histories (on flat series)",
        (
            f"{reports[m].baseline_open} ({reports[m].baseline_flat_open}); every flag listed: "
            f"{_status_text(reports[m].baseline_states)}"
            for m in METHODS
        ),
    )
    for name, cells in _event_and_case_rows(reports, cases):
        row(name, cells)
    row(
        "detection time per history",
        (
            f"{reports[m].detect_seconds / max(reports[m].detections, 1) * 1000:,.0f} ms "
            f"({reports[m].detections} detections)"
            for m in METHODS
        ),
    )
    return "\n".join([*lines, "", *NOTES, "", *_goal_lines(summary)])


def _goal_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"Goals (mlaperf at {summary['revision']}):"]
    lines += [f"  {'PASS' if g['pass'] else 'FAIL'}  {g['goal']}: {g['value']}" for g in summary["goals"]]
    asv = ", ".join("PASS" if g["pass"] else "FAIL" for g in summary["asv_goals"])
    return [*lines, f"Same goals, asv.step_detect: {asv}"]


def to_json(
    summary: dict[str, Any], reports: dict[str, MethodReport], opts: Options, cases: CaseTally
) -> dict[str, Any]:
    methods: dict[str, Any] = {}
    for m in METHODS:
        r = reports[m]
        t = r.steps
        methods[m] = {
            "recall_by_bucket": {
                bucket_label(k): {"found": t.found[k], "total": t.total[k]} for k in range(len(BUCKETS))
            },
            "recall_ge_7": dict(zip(("found", "total"), t.recall(1), strict=True)),
            "newest": {"found": t.newest_found, "total": t.newest_total},
            "exact_commit": t.exact,
            "false_alarms": t.false_alarms,
            "false_alarms_raised": t.raised,
            "false_alarms_raised_after_one_more_run": dict(t.raised_after),
            "series_commits": t.series_commits,
            "false_alarms_per_90x76": t.fa_rate(),
            "groups": t.groups,
            "step_commits": t.step_commits,
            "newest_after_next_run": {
                "confirmed": t.confirmed,
                "of": t.confirmed_of,
                "statuses": dict(t.confirmed_statuses),
            },
            "baseline_open_flags": r.baseline_open,
            "baseline_open_flat_flags": r.baseline_flat_open,
            "baseline_flags_by_state": dict(r.baseline_states),
            "events": [vars(e) for e in r.events],
            "detect_seconds_total": r.detect_seconds,
            "detections": r.detections,
            "goals": goals(r),
            "misses": t.misses,
            "false_alarm_list": t.alarms,
            "false_alarms_by_commit": [
                {"machine": m, "commit": c, "false_alarms": n} for (m, c), n in t.alarm_commits.most_common()
            ],
        }
    return {
        "revision": summary["revision"],
        "seed": opts.seed,
        "rounds": opts.rounds,
        "threshold": opts.threshold,
        "flat_rule": vars(opts.rule),
        "datasets": summary["datasets"],
        "methods": methods,
        "cases": cases_json(cases),
        "pass": all(g["pass"] for g in summary["goals"]),
    }
