"""The nightly's issue for benchmarks that broke: one GitHub issue per machine with series failing at its newest
commit (``mlaperf detect --json``'s ``failing``, ``regressions.failing``), opened, updated while the list changes,
closed once none fails. Detection raises no alert for failed runs, so without it a broken benchmark went unseen
(Jaxion's real history: 6 of 8 benchmarks failed for 11 commits, a review)."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_MARKER = "<!-- mlaperf-failing:"


@dataclass
class Action:
    """What ``nightly alert`` does to one issue (an alert group's, ``mlaperf.nightly_groups.plan_issues``, or a
    machine's failing benchmarks', :func:`plan_failing`)."""

    action: str  # open | update | close | unchanged
    group: Any
    number: int | None = None
    title: str = ""
    body: str = ""
    comment: str = ""


def _key(machine: str) -> str:
    """The machine as the marker names it: a name from data cannot end the HTML comment (``-->``) or forge another
    machine's marker; its digest keeps two names apart that read alike once cleaned."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", machine)[:60] + "." + hashlib.sha256(machine.encode()).hexdigest()[:8]


def marker(machine: str) -> str:
    return f"{_MARKER}{_key(machine)} -->"


def commit_link(sha: object, links: Mapping[str, str]) -> str:
    """A commit in an issue body: its short SHA, linked where ``links`` has a ``repo_url``; "never" for none."""
    text = str(sha or "")
    repo = links.get("repo_url", "").rstrip("/")
    return "never" if not text else f"[`{text[:10]}`]({repo}/commit/{text})" if repo else f"`{text[:10]}`"


def link_lines(links: Mapping[str, str]) -> list[str]:
    """The dashboard's and the nightly run's addresses, those ``links`` has, one line each, for an issue body."""
    return [f"{name}: {links[key]}" for key, name in (("dashboard_url", "Dashboard"), ("run_url", "Nightly run"))
            if links.get(key)]


def _rows(data: Any, field: str) -> list[dict[str, Any]] | None:
    """The well-formed rows of ``field`` (``failing`` or ``failing_unrun``, whose rows also name ``until``)."""
    rows = data.get(field) if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("machine"), str)
            and isinstance(r.get("benchmark"), str) and isinstance(r.get("since"), str)
            and type(r.get("commits")) is int and isinstance(r.get("last_ok"), str | None)
            and (field != "failing_unrun" or isinstance(r.get("until"), str))]


def failing_of(data: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The well-formed rows of the ``failing`` list of a parsed ``detect --json`` document and the one machine it
    covers (``failing_machine``; None: every machine). No list where the document has none (an older document or a
    bare list of records): then the failing issues are left as they are, never closed for lack of news."""
    rows = _rows(data, "failing")
    scope = data.get("failing_machine") if rows is not None else None
    return rows, scope if isinstance(scope, str) else None


def _row_head(r: Mapping[str, Any]) -> str:
    """A series' first two cells in an issue's tables: how a later night finds the series it listed."""
    from regressions.report import fmt_params, md_code

    params = r.get("params") if isinstance(r.get("params"), dict) else {}
    return f"| {md_code(r['benchmark'])} | {md_code(fmt_params(params))} |"


def _unrun_lines(unrun: list[Mapping[str, Any]], links: Mapping[str, str]) -> list[str]:
    """The table of series listed before that did not run at the newest commit, their last results failed."""
    if not unrun:
        return []
    lines = ["", "Listed here before and not run at the machine's newest commit (removed from the suite, renamed, or "
             "skipped there), their last results failed; no longer counted:", "",
             "| benchmark | params | failed from | to | commits | last value at |",
             "| --- | --- | --- | --- | ---: | --- |"]
    return lines + [f"{_row_head(r)} {commit_link(r['since'], links)} | {commit_link(r.get('until'), links)} | "
                    f"{int(r.get('commits') or 0):,} | {commit_link(r.get('last_ok'), links)} |" for r in unrun]


def issue_for_machine(machine: str, rows: list[Mapping[str, Any]], links: Mapping[str, str],
                      unrun: Sequence[Mapping[str, Any]] = ()) -> tuple[str, str]:
    """(title, body) of a machine's failing-benchmarks issue, with the series of ``unrun`` it listed before;
    every value from data escaped as the PR report's."""
    from regressions.report import MAX_BODY_CHARS, md_code

    longest = max(rows, key=lambda r: int(r.get("commits") or 0))
    title = " ".join(f"Benchmarks failing on {machine}: {len(rows)} series, since {str(longest['since'])[:10]}".split())
    lines = [marker(machine), f"mlaperf's nightly found series whose result at the newest commit of machine "
             f"{md_code(machine, table=False)} failed (no value: detection raises no alert for them)."]
    lines += link_lines(links)
    lines += ["", "| benchmark | params | failing since | commits | last value at |",
              "| --- | --- | --- | ---: | --- |"]
    for r in rows:
        lines.append(f"{_row_head(r)} {commit_link(r['since'], links)} | {int(r.get('commits') or 0):,} | "
                     f"{commit_link(r.get('last_ok'), links)} |")
    lines += _unrun_lines(list(unrun), links)
    lines += ["", "This issue closes by itself when no series of this machine fails any more."]
    return title[:250], "\n".join(lines)[:MAX_BODY_CHARS] + "\n"


def plan_failing(doc: Any, open_issues: Iterable[Any], links: Mapping[str, str]) -> list[Action]:
    """open / update / close / unchanged per machine, from the ``failing`` of the parsed ``detect --json`` document
    ``doc``; nothing without one (:func:`failing_of`); of the machine it covers alone where it covers one
    (``detect --machine``: another machine's issue is not closed for lack of news)."""
    failing, scope = failing_of(doc)
    if failing is None:
        return []
    by_machine: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in failing:
        by_machine[r["machine"]].append(r)
    mine = [i for i in open_issues if (i.body or "").startswith(marker(scope) if scope else _MARKER)]
    unrun = _rows(doc, "failing_unrun") or []

    def listed(issue: Any) -> list[dict[str, Any]]:  # the unrun series of the issue's machine that it lists
        return [r for r in unrun if issue.body.startswith(marker(r["machine"])) and _row_head(r) in issue.body]

    out = []
    for machine, rows in sorted(by_machine.items()):
        issue = next((i for i in mine if (i.body or "").startswith(marker(machine))), None)
        title, body = issue_for_machine(machine, rows, links, listed(issue) if issue else [])
        if issue is None:
            out.append(Action("open", f"failing on {machine}", None, title, body))
        else:
            same = (issue.title, issue.body) == (title, body)
            out.append(Action("unchanged" if same else "update", f"failing on {machine}", issue.number, title, body))
    failing_now = {marker(m) for m in by_machine}
    for issue in mine:
        if not any(issue.body.startswith(m) for m in failing_now):
            key = issue.body[len(_MARKER):].split(" -->", 1)[0]
            gone = listed(issue)
            note = ("" if not gone else "\n\nNot fixed, as far as mlaperf can tell: of the series listed here, these "
                    "did not run at the machine's newest commit and their last results failed (reopen this issue "
                    "if they still break):\n" + "\n".join(_unrun_lines(gone, links)[3:]))
            out.append(Action("close", f"failing on {key}", issue.number,
                              comment="No series of this machine fails at its newest commit any more; closing." + note))
    return out
