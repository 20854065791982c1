"""Rendering: the pull-request markdown, machine-readable JSON and the terminal table of `detect`.

Every value taken from data (benchmark, params, machine, unit, commit message) goes through
:func:`md_code` or :func:`md_text` before it reaches markdown: one line, at most ``MAX_CELL_CHARS``
characters, markdown and HTML inert, ``@mentions``, ``#123`` references, autolinks and the report
marker broken by a zero-width space (the device GitHub's own bots use), so a hostile benchmark name can
neither notify people, render a link or an image, break the table, nor pass for the report's marker.
The PR body stays under ``MAX_BODY_CHARS`` (GitHub refuses bodies over 65,536 characters): rows are
kept worst first and a last line says how many were left out and where the full report is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from regressions.compare import (
    CHANGED,
    FAILED,
    IMPROVED,
    MIN_HISTORY_RUNS,
    MISSING,
    NEW,
    NOT_RUN,
    REGRESSED,
    REMOVED,
    REPAIRED,
    SIDE_FAILED,
    SIDE_MISSING,
    SIDE_OK,
    SIDE_WORDS,
    UNCHANGED,
    UNTESTED,
    Comparison,
    change_text,
    fails_check,
    ratio_sides,
)
from regressions.compare_sides import EnvChange
from regressions.labels import params_label
from regressions.level_rules import GRADUAL
from regressions.renames import Rename, removal_lines, renamed_note, renames
from regressions.units import CONTROL, fmt_p, fmt_pair, fmt_ratio, terminal_text

MARKER = "<!-- mlaperf-benchmark-report -->"
MAX_BODY_CHARS = 60_000
MAX_CELL_CHARS = 200
MAX_MACHINES_SHOWN = 10
ZWSP = "\u200b"

# Characters that start inline markdown or HTML, or split a table cell (backslash-escaped in text).
_MD_ACTIVE = re.compile(r"([\\`*_~\[\]()!<>&|$])")
# What GitHub turns into links or notifications in text: mentions and e-mail addresses (@), issue
# references (#123, GH-123), URL schemes and www. autolinks. Broken wherever they stand, not only after a word
# boundary: GitHub links "_www.x" and the URL in "1https://x", where "_" and "1" are word characters.
_LINKISH = re.compile(r"(@|#(?=\d)|GH-(?=\d)|(?:https?|ftp|mailto|xmpp|www)(?=[:.]))", re.IGNORECASE)
# A word of 7 or more hex digits, which GitHub links as a commit (one of a fork's too, shown under this
# repository's address): in text, every six are parted by a zero-width space. Code spans are not linked.
_HEX_RUN = re.compile(r"[0-9a-fA-F]{7,}")


def _neutral(value: Any) -> str:
    """One line of at most MAX_CELL_CHARS characters with links, mentions and the marker broken."""
    text = CONTROL.sub(" ", str(value))  # a value stays on its table row and cannot reorder the text around it
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1] + "\u2026"
    text = _LINKISH.sub(lambda m: m.group(1) + ZWSP, text)
    return text.replace("<!--", "<!" + ZWSP + "--")


def _unhex(match: re.Match[str]) -> str:
    run = match.group(0)
    return ZWSP.join(run[i : i + 6] for i in range(0, len(run), 6))


def md_text(value: Any) -> str:
    """A value from data as plain markdown text (table cells and prose alike)."""
    return _MD_ACTIVE.sub(r"\\\1", _neutral(value))


def gh_text(value: Any) -> str:
    """:func:`md_text` for a body GitHub renders (the PR comment): hex words parted too, so none links a commit."""
    return _MD_ACTIVE.sub(r"\\\1", _HEX_RUN.sub(_unhex, _neutral(value)))


def md_code(value: Any, *, table: bool = True) -> str:
    """A value from data as an inline code span; in a table, ``|`` is escaped (GFM splits cells first)."""
    text = _neutral(value)
    if not text.strip():
        return "-"
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " "):
        text = f" {text} "  # CommonMark strips one space from each side of such a span
    return f"{fence}{text}{fence}"


def fmt_params(params: dict[str, Any]) -> str:
    """``impl=mma, concurrency=64`` in the params' order (``regressions.labels``), ``-`` without any."""
    return params_label(params) or "-"


def _ratio(c: Comparison) -> str:
    return fmt_ratio(c.ratio)


def _p(c: Comparison) -> str:
    return fmt_p(c.p_value)


_SIDE_CELL = {side: f"**{word}**" if side in (SIDE_FAILED, SIDE_MISSING) else word for side, word in SIDE_WORDS.items()}


def side_texts(c: Comparison, words: Mapping[str, str], shown: Callable[[str], str] = str) -> tuple[str, str]:
    """Base and head as a report reads them: values side by side (``fmt_pair``: one scale; ``shown`` of each),
    else what the side lacks in ``words`` (``compare.SIDE_WORDS``, or this report's bold cells)."""
    base, head = fmt_pair(c.base, c.head, c.unit, benchmark=c.benchmark)
    return (shown(base) if c.base_status == SIDE_OK else words[c.base_status],
            shown(head) if c.head_status == SIDE_OK else words[c.head_status])


_HEADER = [
    "| benchmark | params | machine | base | head | ratio | change | p | test |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
]


def _row(c: Comparison, renamed: Rename | None = None) -> str:
    test = md_text(c.method)
    if renamed is not None:  # the old name's row points to the new one, the new one's to the old; and the change
        across = f" ({fmt_ratio(renamed.ratio)})" if renamed.ratio is not None else ""
        test = (f"renamed? {md_code(renamed.new.benchmark)}{across}" if renamed.old is c
                else f"renamed? from {md_code(renamed.old.benchmark)}{across}")
    return (
        f"| {md_code(c.benchmark)} | {md_code(fmt_params(c.params))} | {md_code(c.machine)} | "
        f"{' | '.join(side_texts(c, _SIDE_CELL, gh_text))} | "
        f"{_ratio(c)} | {change_text(c.status, c.base, c.head, c.direction)} | {_p(c)} | {test} |"
    )


def renamed_markdown(found: Sequence[Rename], comparisons: Sequence[Comparison], status: str) -> str:
    """The PR report's paragraph on the ``status`` rows that look renamed (``renames.renamed_note``) and, for
    missing ones, the ``removed`` list to paste as a fenced block (no line of it starts with a backtick: it cannot
    close the fence; each line one line of at most MAX_CELL_CHARS, the marker broken)."""
    note = renamed_note(found, comparisons, lambda t: md_code(t, table=False), status=status)
    if status != MISSING:
        return note
    return "\n".join([note, "", "```toml", *removal_lines(found, comparisons), "```"])  # ASCII, no '<', no newline


# (status, heading, collapsed) in the order of severity: rows are kept in this order under the cap.
_SECTIONS = [
    (FAILED, "Failed (no result where the benchmark ran)", False),
    (REGRESSED, "Regressions", False),
    (MISSING, "Missing at head (measured at base; declare a removal with an asv version bump or `removed`)", False),
    (IMPROVED, "Improvements", False),
    (REPAIRED, "Repaired (failed at base, measured at head)", False),
    (CHANGED, "Benchmark changed at head (a new asv version: not compared; the ratio is for reference)", False),
    (UNTESTED, "Beyond the threshold, untested (one value a side and fewer than "
     f"{MIN_HISTORY_RUNS} earlier commits of the series: nothing tells it from noise)", True),
    (NEW, "Not measured at base (new in the suite, or not selected on base)", True),
    (REMOVED, "Not measured at head (gone from the suite, or not selected on head)", True),
    (NOT_RUN, "Not run (not selected, or the machine did not run that commit)", True),
    (UNCHANGED, "Unchanged", True),
]
_SUMMARY = {
    FAILED: "failed",
    REGRESSED: "regression{s}",
    MISSING: "missing",
    IMPROVED: "improvement{s}",
    REPAIRED: "repaired",
    CHANGED: "changed (new benchmark version)",
    UNTESTED: "untested beyond the threshold",
    UNCHANGED: "unchanged",
    NEW: "not measured at base",  # the words of the text table and the dashboard's Compare page
    REMOVED: "not measured at head",
    NOT_RUN: "not run",
}


def status_count(status: str, n: int) -> str:
    """``3 improvements``, ``1 regression``, ``240 not measured at base``: a count in the report's words."""
    return f"{n:,} " + _SUMMARY[status].format(s="s" * (n != 1))


def failed_split(comparisons: Sequence[Comparison]) -> str:
    """Where the failed rows failed: ``1 on head only, 84 on both``."""
    failed = [c for c in comparisons if c.status == FAILED]
    where = {
        "on head only": sum(c.head_status == SIDE_FAILED and c.base_status != SIDE_FAILED for c in failed),
        "on base only": sum(c.base_status == SIDE_FAILED and c.head_status != SIDE_FAILED for c in failed),
        "on both": sum(c.base_status == SIDE_FAILED and c.head_status == SIDE_FAILED for c in failed),
    }
    return ", ".join(f"{n:,} {side}" for side, n in where.items() if n)


def noisy(c: Comparison) -> bool:
    """Unchanged, yet beyond the threshold: no test could tell the change from the series' noise (stingray's
    1.47x with wide 99% intervals sat among 140 unchanged rows in name order: a review)."""
    return c.status == UNCHANGED and c.slowdown is not None and any(ratio_sides(c.slowdown, c.threshold))


def ordered(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Worst first: failures (on head before on base), regressions by slowdown, improvements by
    speed-up, untested changes by size, then the rest in their given order."""
    by_status: dict[str, list[Comparison]] = {s: [] for s, _, _ in _SECTIONS}
    for c in comparisons:
        by_status[c.status].append(c)
    by_status[FAILED].sort(key=lambda c: (c.head_status != SIDE_FAILED, c.base_status == SIDE_FAILED))
    # A regression without a slowdown factor left or crossed 0 (no ratio): the largest change, first.
    by_status[REGRESSED].sort(key=lambda c: -(c.slowdown if c.slowdown is not None else math.inf))
    by_status[IMPROVED].sort(key=lambda c: c.slowdown or 0.0)
    # Untested either way: the largest change first (a 5.90x one was row 89, in name order: a review).
    by_status[UNTESTED].sort(key=lambda c: -max(c.slowdown or 1.0, 1.0 / (c.slowdown or 1.0)))
    # Unchanged beyond the threshold (not significant) first, the largest first; the others as given.
    by_status[UNCHANGED].sort(key=lambda c: -max(c.slowdown, 1.0 / c.slowdown) if noisy(c) else 0.0)
    return [c for s, _, _ in _SECTIONS for c in by_status[s]]


# A repository's web page, as GitHub Actions names it: what a commit link may start with.
REPO_URL = re.compile(r"https://[\w.-]+(?::\d+)?/[\w.-]+/[\w.-]+")
FULL_SHA = re.compile(r"[0-9a-f]{40}")


def commit_link(sha: str, repo_url: str = "") -> str:
    """The short SHA as code, a link to the commit's page where ``repo_url`` is a repository's page and ``sha`` a
    full SHA (nothing from data goes into the address)."""
    code = md_code(sha[:12], table=False)
    return f"[{code}]({repo_url}/commit/{sha})" if REPO_URL.fullmatch(repo_url) and FULL_SHA.fullmatch(sha) else code


def _commit(sha: str, message: str | None, repo_url: str = "") -> str:
    subject = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return commit_link(sha, repo_url) + (f" ({gh_text(subject)})" if subject else "")


def _render(
    rows: list[tuple[str, str]], counts: dict[str, int], total: int, *, head_lines: list[str], cap: int | None,
    beyond: int = 0, notes: Mapping[str, str] | None = None,
) -> str:
    """The body from (status, rendered row) pairs in the order of severity; ``beyond``: how many unchanged rows
    moved beyond the threshold (:func:`noisy`), named in that section's heading; ``notes``: a paragraph under a
    status's heading."""
    lines = list(head_lines)
    for status, heading, collapsed in _SECTIONS:
        part = [line for s, line in rows if s == status]
        if not part:
            continue
        shown = f"{heading} ({len(part)}" + (f" of {counts[status]})" if len(part) < counts[status] else ")")
        if status == UNCHANGED and beyond:
            shown += (f": the first {beyond:,} moved beyond the threshold, but no test could tell it from noise "
                      "(largest first)")
        note = ["", notes[status]] if notes and status in notes else []
        if collapsed:
            lines += ["", f"<details><summary>{shown}</summary>", *note, "", *_HEADER, *part, "", "</details>"]
        else:
            lines += ["", f"### {shown}", *note, "", *_HEADER, *part]
    if len(rows) < total:
        lines += [
            "",
            f"_{total - len(rows):,} of {total:,} rows left out to keep this comment under {cap:,} characters "
            "(the least severe first); every row is in the workflow run's artifact (`report.json`), and "
            "`mlaperf compare --full-markdown-out FILE` writes them all as markdown._",
        ]
    if not total:
        lines += ["", "No series has results at either commit on these machines."]
    return "\n".join(lines) + "\n"


def compare_markdown(
    comparisons: Sequence[Comparison],
    *,
    base: str,
    head: str,
    machines: Sequence[str],
    threshold_note: str,
    marker: bool = True,
    base_message: str | None = None,
    head_message: str | None = None,
    max_chars: int | None = MAX_BODY_CHARS,
    repo_url: str = "",
) -> str:
    """PR comment: summary line, then failures, regressions, improvements (worst first), new, removed,
    not run and unchanged (collapsed). With ``max_chars`` the body stays shorter than that: the least
    severe rows are left out and a last line says how many; None renders every row (the full report).
    ``repo_url``: the repository's page, where the two commits link to (:func:`commit_link`)."""
    ordered_rows = ordered(comparisons)
    found = renames(ordered_rows)
    renamed = {id(row): r for r in found for row in (r.old, r.new)}
    rows = [(c.status, _row(c, renamed.get(id(c)))) for c in ordered_rows]
    notes = {status: renamed_markdown(found, ordered_rows, status) for status in (MISSING, REMOVED)
             if any(r.old.status == status for r in found)}
    counts = {s: 0 for s, _, _ in _SECTIONS}
    for c in ordered_rows:
        counts[c.status] += 1
    beyond = sum(map(noisy, ordered_rows))
    icon = ":x:" if any(fails_check(c) for c in ordered_rows) else ":white_check_mark:"
    parts = [f"**{counts[REGRESSED]:,} regression{'s' * (counts[REGRESSED] != 1)}**"]
    if counts[FAILED]:
        parts.append(f"**{counts[FAILED]:,} failed** ({failed_split(ordered_rows)})")
    if counts[MISSING]:
        parts.append(f"**{counts[MISSING]:,} missing**")
    for status in (IMPROVED, REPAIRED, CHANGED, UNTESTED, UNCHANGED, NEW, REMOVED, NOT_RUN):
        if counts[status] or status in (IMPROVED, UNCHANGED):
            parts.append(status_count(status, counts[status]))
    shown_machines = ", ".join(md_code(m, table=False) for m in list(machines)[:MAX_MACHINES_SHOWN])
    if len(machines) > MAX_MACHINES_SHOWN:
        shown_machines += f" and {len(machines) - MAX_MACHINES_SHOWN} more"
    head_lines = [MARKER] if marker else []
    head_lines += [
        "## mlaperf benchmark report",
        f"{icon} {', '.join(parts)}: head {_commit(head, head_message, repo_url)} against base "
        f"{_commit(base, base_message, repo_url)} on {shown_machines or 'no machine'} ({gh_text(threshold_note)}; a "
        "change counts when it is also significant; ratio = head / base).",
    ]
    if any(c.status == FAILED and c.base_status == SIDE_FAILED == c.head_status for c in ordered_rows):
        head_lines += ["", "Failed on both: base and head ran the head's suite, so a benchmark this change edited can "
                       "fail on base as well; one broken before it fails every report until it is fixed or declared "
                       "removed."]

    def render(n: int) -> str:
        return _render(rows[:n], counts, len(rows), head_lines=head_lines, cap=max_chars, beyond=beyond, notes=notes)

    full = render(len(rows))
    if max_chars is None or body_size(full) < max_chars:
        return full
    lo, hi = 0, len(rows)  # render(lo) fits, render(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if body_size(render(mid)) < max_chars else (lo, mid)
    return render(lo)


def body_size(text: str) -> int:
    """Length as GitHub may count it: UTF-16 code units (a character outside the BMP counts twice)."""
    return len(text.encode("utf-16-le")) // 2


def compare_json(comparisons: Sequence[Comparison]) -> str:
    return json.dumps([c.to_json() for c in comparisons], indent=2, allow_nan=False)


def gradual_note(labels: object) -> str:
    """" (gradual)" after a gradual regression's status or commit range (``level_rules.GRADUAL``), else "": the
    one wording of `detect`, the nightly's issue and the dashboard."""
    return f" ({GRADUAL})" if isinstance(labels, list | tuple) and GRADUAL in labels else ""


def now_text(partly: bool, now_ratio: float | None) -> str:
    """The "now" cell: where a partly recovered alert's series stands (its now_ratio), "-" for any other."""
    return fmt_ratio(now_ratio) if partly else "-"


def nothing_listed(closed: Mapping[str, int] | None = None, listed: str = "open") -> str:
    """What `detect` prints when no regression is listed. A bare "no regressions" under "4 flagged (status now:
    4 fixed)" read as a contradiction: the listing leaves other statuses out, so it says which it listed
    (``listed``: "open", or the statuses asked for) and counts the others (``closed``: status -> count)."""
    left = ", ".join(f"{n} {status}" for status, n in sorted((closed or {}).items()) if n)
    if left:
        return f"no {listed} regressions ({left}; --all lists them)"
    if closed is not None:
        return "no regressions stored"
    return "nothing listed (by default only open regressions; --all lists fixed and closed ones too)"


def reversed_note(base: str, head: str) -> str:
    """Said where BASE comes after HEAD in history (``mlaperf compare`` on stderr, the dashboard's Compare page)."""
    return (f"BASE {base[:12]} comes after HEAD {head[:12]} in history; ratios read HEAD / BASE, so a slowdown since "
            "HEAD reads as an improvement (give the older commit first)")


def environments_note(machine: str, change: EnvChange) -> str:
    """Said where base and head share no asv environment on ``machine`` (``compare_sides.environments_apart``):
    ``mlaperf compare`` on stderr, the dashboard's Compare page."""
    which = ("the one benchmark" if change.total == 1 else f"all {change.total:,} benchmarks"
             if change.benchmarks == change.total else f"{change.benchmarks:,} of {change.total:,} benchmarks")
    return (f"on {machine}, {which} ran in no asv environment common to BASE ({', '.join(change.base)}) and HEAD "
            f"({', '.join(change.head)}): each side's value is the median of its runs in those environments, so a "
            "change may be the environment's (Python, compilers, libraries), not the code's")


def aligned(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A terminal table's lines: columns padded to their widest cell, cells escaped (names come from data: no
    escape sequence reaches the terminal)."""
    cells = [[terminal_text(x) for x in row] for row in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells, strict=False)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False))]
    return out + ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)) for row in cells]


def detect_table(
    records: Sequence[dict[str, Any]], *, closed: Mapping[str, int] | None = None, listed: str = "open"
) -> str:
    """Plain-text table of regressions for a terminal (:func:`nothing_listed` when there are none)."""
    if not records:
        return nothing_listed(closed, listed)
    head = ["status", "commit", "machine", "benchmark", "params", "before", "after", "ratio", "p"]
    rows = [
        [
            r["status"] + ("*" if r.get("new") else "") + gradual_note(r.get("labels")),
            r["commit"][:10],
            r["machine"],
            r["benchmark"],
            fmt_params(r["params"]),
            *fmt_pair(r["before"], r["after"], r.get("unit"), benchmark=r["benchmark"]),
            fmt_ratio(r["ratio"]),
            fmt_p(r.get("p_value")),
        ]
        for r in records
    ]
    if any(r.get("closed_at") or r.get("fixed_at") for r in records):  # closed ones listed: where and why
        head += ["closed at", "reason"]
        for row, r in zip(rows, records, strict=True):
            row += [(r.get("closed_at") or r.get("fixed_at") or "-")[:10], r.get("close_reason") or "-"]
    if any(r.get("partly_recovered") for r in records):  # the step's numbers stand; "now": where the series is
        head.insert(head.index("ratio") + 1, "now")
        for row, r in zip(rows, records, strict=True):
            row.insert(head.index("now"), now_text(bool(r.get("partly_recovered")), r.get("now_ratio")))
    if any(r.get("assignee") or r.get("issue_url") for r in records):  # triaged: who has it, where it is tracked
        head += ["assignee", "issue"]
        for row, r in zip(rows, records, strict=True):
            row += [r.get("assignee") or "-", r.get("issue_url") or "-"]
    out = aligned(head, rows)
    if any(r.get("new") for r in records):
        out.append("(* flagged by this run)")
    return "\n".join(out)
