"""`mlaperf compare --format text`: the comparison as an aligned plain-text table for a terminal (the default
there), worst rows first (the PR report's order), with the counts line on top. Series measured on one side only
(not measured at base or at head), unchanged and not-run series are counted, not listed, as the dashboard's Compare
page hides them (``--format markdown`` or ``json`` lists every row); the largest untested changes are listed after
the judged rows (with none judged, a table of counts alone hid a 32% change: a review on Devito's results). No
Markdown escapes, no HTML.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence

from regressions import compare as cmp
from regressions.compare import Comparison
from regressions.labels import series_label
from regressions.renames import LISTED, removal_lines, renamed_note, renames
from regressions.report import failed_split, noisy, ordered, side_texts, status_count
from regressions.units import fmt_p, fmt_ratio, terminal_text

FORMATS = ("text", "markdown", "json")
# Statuses in the order the counts line gives them (in the PR report's words: ``report.status_count``).
_COUNTED = (cmp.REGRESSED, cmp.FAILED, cmp.MISSING, cmp.IMPROVED, cmp.REPAIRED, cmp.CHANGED, cmp.UNTESTED, cmp.NEW,
            cmp.REMOVED, cmp.UNCHANGED, cmp.NOT_RUN)
# Listed, in the PR report's order (regressions.report.ordered); the others are only counted, in the counts
# line's words (a suite not run at one side is no change of the code under test: hundreds of rows).
_STATUS_WORD = {cmp.REGRESSED: "REGRESSED", cmp.FAILED: "FAILED", cmp.MISSING: "MISSING", cmp.IMPROVED: "improved",
                cmp.REPAIRED: "repaired", cmp.CHANGED: "changed", cmp.UNTESTED: "untested"}
UNTESTED_LISTED = 10  # the largest untested changes listed; the others counted


def _counts(comparisons: Sequence[Comparison]) -> dict[str, int]:
    counts = dict.fromkeys(_COUNTED, 0)
    for c in comparisons:
        counts[c.status] = counts.get(c.status, 0) + 1
    return counts


def counts_line(comparisons: Sequence[Comparison]) -> str:
    """``1 regression, 2 failed (2 on both), 3 improvements, 236 unchanged`` (regressions, failed, improvements and
    unchanged always; the other statuses when present; where the failed ones failed, as the PR report says)."""
    counts = _counts(comparisons)
    return ", ".join(status_count(s, counts[s]) + (f" ({failed_split(comparisons)})" if s == cmp.FAILED and counts[s]
                                                   else "")
                     for s in _COUNTED if counts[s] or s in (cmp.REGRESSED, cmp.FAILED, cmp.IMPROVED, cmp.UNCHANGED))


def series_name(c: Comparison) -> str:
    """``bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64]`` (``labels.series_label``: the
    module too, so two modules' classes of one name differ)."""
    return terminal_text(series_label(c.benchmark, c.params))  # from data: no escape sequence reaches the terminal


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def _renamed_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """Of the missing, then of those not measured at head, what looks renamed (``renames.renamed_note``) and its
    pairs (at most ``renames.LISTED``), then the missing ones' ``removed`` list."""
    found, lines = renames(comparisons), []
    for status, of in ((cmp.MISSING, "the missing"), (cmp.REMOVED, "those not measured at head")):
        pairs = [r for r in found if r.old.status == status]
        if not pairs:
            continue
        lines += ["", renamed_note(found, comparisons, terminal_text, status=status, of=of)]
        lines += [f"    {series_name(r.old)} -> {terminal_text(r.new.benchmark)}"
                  + (f" ({fmt_ratio(r.ratio)})" if r.ratio else "") for r in pairs[:LISTED]]
        if len(pairs) > LISTED:
            lines.append(f"    and {len(pairs) - LISTED:,} more (--format markdown names each)")
        if status == cmp.MISSING:
            lines += ["", *(f"    {terminal_text(line)}" for line in removal_lines(found, comparisons))]
    return lines


def compare_text(comparisons: Sequence[Comparison], *, base: str, head: str, machines: Sequence[str],
                 threshold_note: str, width: int | None = None) -> str:
    """The report as text: a title line, the counts line, then one aligned row per listed series. ``width``
    (default: the terminal's, no limit when stdout is not one): where the series' names do not fit beside
    the numbers, each name goes on its own line under them."""
    width = width or (shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 10**6)
    many = len(set(machines)) > 1
    lines = [f"mlaperf compare: head {head[:12]} against base {base[:12]} on "
             f"{terminal_text(', '.join(machines)) or 'no machine'} "
             f"({threshold_note}; ratio = head / base)", counts_line(comparisons)]
    rows = [c for c in ordered(comparisons) if c.status in _STATUS_WORD]
    untested = [c for c in rows if c.status == cmp.UNTESTED]
    rows = [c for c in rows if c.status != cmp.UNTESTED] + untested[:UNTESTED_LISTED]  # ordered: largest first
    header = ["status", *(["machine"] if many else []), "series", "base", "head", "ratio", "change", "p"]
    table = [[_STATUS_WORD[c.status], *([terminal_text(c.machine)] if many else []), "",
              *side_texts(c, cmp.SIDE_WORDS),
              fmt_ratio(c.ratio),  # '-' where there is none, as the PR report and the dashboard say
              cmp.change_text(c.status, c.base, c.head, c.direction),
              fmt_p(c.p_value)] for c in rows]
    if table:
        name = header.index("series")
        widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
        rest = sum(w for i, w in enumerate(widths) if i != name) + 2 * (len(widths) - 1)
        full = [series_name(c) for c in rows]
        wrapped = max(map(len, full)) > width - rest
        # A narrow terminal: each series' name on a line of its own under its numbers, whole (cut, the
        # parameters that tell the rows apart would go first).
        cols = [i for i in range(len(header)) if not (wrapped and i == name)]
        for r, label in zip(table, full, strict=True):
            r[name] = label
        widths[name] = max(len(r[name]) for r in [header, *table])
        right = {header.index(h) for h in ("base", "head", "ratio", "change", "p")}

        def line(cells: list[str]) -> str:
            return "  ".join(cells[i].rjust(widths[i]) if i in right else cells[i].ljust(widths[i])
                             for i in cols).rstrip()

        lines += ["", line(header)]
        for r in table:
            lines += [line(r), f"    {_cut(r[name], width - 4)}"] if wrapped else [line(r)]
    lines += _renamed_lines(comparisons)
    counts = _counts(comparisons)
    counts[cmp.UNTESTED] = max(0, len(untested) - UNTESTED_LISTED)
    unlisted = [(s, counts[s]) for s in _COUNTED if (s not in _STATUS_WORD or s == cmp.UNTESTED) and counts[s]]
    if untested:
        lines += ["", f"untested: one value a side and fewer than {cmp.MIN_HISTORY_RUNS} earlier commits to judge "
                  f"by; the {min(len(untested), UNTESTED_LISTED)} largest of {len(untested):,} changes beyond the "
                  "threshold listed"]
    if unlisted:
        beyond = sum(map(noisy, comparisons))
        counted = ", ".join(status_count(s, n) + (f" ({beyond:,} beyond the threshold, not significant)"
                                                  if s == cmp.UNCHANGED and beyond else "") for s, n in unlisted)
        lines += ["", f"Not listed: {counted} (--format markdown or json lists every series)."]
    return "\n".join(lines) + "\n"
