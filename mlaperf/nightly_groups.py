"""The nightly's issue per confirmed alert group (``mlaperf nightly alert``): its title and body from the
``detect --json`` records, escaped as the PR report, and the open / update / close / unchanged plan against the
label's open issues (a group's issue found by its marker; one whose alerts joined another group follows it)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from mlaperf.nightly_failing import Action, commit_link, link_lines
from regressions.store import OPEN_STATUSES  # the detector's rule: listed by default, keep an issue open


def _fmt(value: Any, unit: Any) -> str:
    from regressions.units import fmt_value

    try:
        return fmt_value(None if value is None else float(value), unit)
    except (TypeError, ValueError):
        return "-"


_GROUP_MARKER = "<!-- mlaperf-alert-group:"


def group_marker(group: Any) -> str:
    return f"{_GROUP_MARKER}{group} -->"


def issue_for_group(group: Any, rows: list[Mapping[str, Any]], links: Mapping[str, str]) -> tuple[str, str]:
    """(title, body) of a group's issue; every value from data goes through the PR report's escaping."""
    from regressions.direction import UP_IS_WORSE, slowdown
    from regressions.level_rules import PARTLY_RECOVERED
    from regressions.report import MAX_BODY_CHARS, fmt_params, gradual_note, md_code, md_text, now_text
    from regressions.units import fmt_p, fmt_ratio

    first = rows[0]
    sha = str(first.get("group_commit") or first["commit"])  # the group's range, not one member's
    parent = first.get("group_parent") or first.get("parent")

    def worse(r: Mapping[str, Any]) -> float:
        """How much worse the series got (a rate's 0.50x is 2.00x worse): the dashboard's and the site's "worst"."""
        w = slowdown(float(r.get("ratio") or "nan"), str(r.get("direction") or UP_IS_WORSE))
        return w if math.isfinite(w) else -math.inf

    rows = sorted(rows, key=worse, reverse=True)  # worst first
    worst = worse(rows[0])
    machine = str(first["machine"])
    title = f"Performance regression on {machine} at {sha[:10]}: {len(rows)} series (worst {fmt_ratio(worst)})"
    title = " ".join(title.split())[:250]
    lines = [
        group_marker(group),
        f"mlaperf's nightly found a confirmed regression (alert group {md_text(group)}) on machine "
        f"{md_code(machine, table=False)} at commit {commit_link(sha, links)}"
        + (f", after `{str(parent)[:10]}`." if parent else "."),
        *link_lines(links),
        "",
        "Numbers as detection sees them tonight (medians of up to 30 runs each side of the step), updated "
        "every night while the level settles.",
        "",
    ]
    # Where the series stands now, once some came part of the way back (detect's "now" column, one rule).
    now = any(PARTLY_RECOVERED in (r.get("labels") or ()) for r in rows)
    lines += [f"| status | benchmark | params | before | after | ratio |{' now |' if now else ''} p |",
              f"| --- | --- | --- | ---: | ---: | ---: |{' ---: |' if now else ''} ---: |"]  # fmt: skip
    for r in rows:
        params = r.get("params") or {}
        shown = fmt_params(params) if isinstance(params, dict) else params
        labels = r.get("labels") or ()
        status = md_text(r["status"]) + gradual_note(labels)  # the note is ours, not data
        now_cell = f" {now_text(PARTLY_RECOVERED in labels, r.get('now_ratio'))} |" if now else ""
        lines.append(
            f"| {status} | {md_code(r.get('benchmark', ''))} | {md_code(shown or '-')} | "
            f"{_fmt(r.get('before'), r.get('unit'))} | {_fmt(r.get('after'), r.get('unit'))} | "
            f"{fmt_ratio(r.get('ratio'))} |{now_cell} {fmt_p(r.get('p_value'))} |"
        )
    lines += ["", "Acknowledge or ignore series in the dashboard (`mlaperf dashboard --writable`); this issue "
              "closes by itself when no series of the group is open any more."]  # fmt: skip
    return title, "\n".join(lines)[:MAX_BODY_CHARS] + "\n"


def _older_than(rows: Iterable[Mapping[str, Any]], cutoff: datetime | None) -> bool:
    """Every commit of the group dated before ``cutoff`` (a row without a readable date counts as recent)."""
    if cutoff is None:
        return False
    for r in rows:
        try:
            when = datetime.fromisoformat(str(r.get("date")))
        except ValueError:
            return False
        if when.tzinfo is not None:
            when = when.astimezone(UTC).replace(tzinfo=None)
        if when >= cutoff:
            return False
    return True


def plan_issues(
    records: Iterable[Mapping[str, Any]], open_issues: Iterable[Any], links: Mapping[str, str],
    opened_after: datetime | None = None,
) -> list[Action]:
    """open / update / close / unchanged per alert group, given the label's open issues. A group with no issue
    whose commits are all dated before ``opened_after`` (naive UTC) is ``not_opened``: the first night after a
    history is imported found every old step at once (a review: 7 issues for steps of months before)."""
    open_issues = list(open_issues)
    by_group: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("group") is not None:
            by_group[r["group"]].append(r)
    existing = {}
    for issue in open_issues:
        for group in by_group:
            if (issue.body or "").startswith(group_marker(group)):
                existing[group] = issue
    # Issues of groups that are no more: their alerts joined another group of the same range (one event found as
    # two night by night). Never read so on a night that read no alert at all.
    followed = {issue.number for issue in existing.values()}
    orphans = [i for i in open_issues if by_group and i.number not in followed
               and (i.body or "").startswith(_GROUP_MARKER)]  # fmt: skip
    actions = []
    for group, rows in sorted(by_group.items(), key=lambda kv: str(kv[0])):
        statuses = {r["status"] for r in rows}
        issue = existing.get(group)
        open_rows = [r for r in rows if r["status"] in ("new", "acknowledged")]
        if issue is not None and not statuses & set(OPEN_STATUSES):
            why = ", ".join(f"{s} {sum(r['status'] == s for r in rows)}" for s in sorted(statuses))
            comment = f"No series of this alert group is open any more ({why}); closing."
            actions.append(Action("close", group, issue.number, comment=comment))
        elif issue is not None and open_rows:
            title, body = issue_for_group(group, open_rows, links)
            kind = "unchanged" if (issue.title, issue.body) == (title, body) else "update"
            actions.append(Action(kind, group, issue.number, title, body))
        elif issue is None and "new" in statuses:
            title, body = issue_for_group(group, open_rows, links)
            # A merged group's issue naming this range follows this group (its marker rewritten): no second issue,
            # whatever its age (an old group's open issue is not closed as followed by one never opened).
            sha = str(rows[0].get("group_commit") or rows[0].get("commit") or "")
            heir = next((i for i in orphans if sha and sha in (i.body or "")), None)
            orphans = [i for i in orphans if i is not heir]
            if heir is not None:
                actions.append(Action("update", group, heir.number, title, body))
            elif _older_than(rows, opened_after):
                actions.append(Action("not_opened", group, None, title, body,
                                      comment=f"every commit dated before {opened_after:%Y-%m-%d}"))
            else:
                actions.append(Action("open", group, None, title, body))
    joined = "The alerts of this group joined another alert group of the same commit range, whose issue follows them."
    for issue in orphans:  # whose alerts joined a group that has an issue of its own
        actions.append(Action("close", issue.body[len(_GROUP_MARKER):].split(" ", 1)[0], issue.number, comment=joined))
    return actions
