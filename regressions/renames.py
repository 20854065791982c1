"""Series that look renamed between two commits: a case measured at base only beside one measured at head only.

asv keys a series by its benchmark's full name, so renaming a class or moving a module makes every case of it
"missing at head" (where its module still ran: that fails a check) or "not measured at head", beside as many
"not measured at base": a suite-wide rename read as 378 missing rows and nothing said why (a review on
third-party results). An old case (measured at base, gone at head) and a new one (measured at head, absent at
base) pair when they ran on the same machine with the same parameters and unit and their names end alike: the
most trailing dotted parts in common (the method at least), with no other candidate as close on either side. The
pairing is a hint, never a verdict: missing rows still fail the check until the old names are declared removed,
which :func:`removal_patterns` words for the configuration's ``removed`` list.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from regressions.compare import MISSING, NEW, REMOVED, SIDE_OK, change_ratio
from regressions.compare_sides import case_params
from regressions.config import case_text
from regressions.units import fmt_ratio

MIN_TAIL = 2  # trailing name parts (class and method) that pair a case on their own
MIN_MOVES = 2  # pairs of one move (old prefix -> new prefix) that pair cases sharing only the method
MAX_PATTERN_CHARS = 1_000  # a longer removal pattern is counted, not written out
LISTED = 10  # removal patterns a note spells out; the rows name the others


class Row(Protocol):
    """What a pairing reads of a comparison (a ``Comparison``, or a row of the dashboard's compare frame)."""

    status: str
    benchmark: str
    params: Mapping[str, Any]
    machine: str
    unit: str | None
    base: float | None
    head: float | None
    base_status: str
    threshold: float


@dataclass(frozen=True)
class Rename:
    """``old`` (measured at base only: missing or not measured at head) looks renamed to ``new`` (measured at head
    only)."""

    old: Row
    new: Row

    @property
    def ratio(self) -> float | None:
        """The new name's head over the old name's base: the change across the rename, for reference only."""
        return change_ratio(self.old.base, self.new.head)


def _tail(a: str, b: str) -> int:
    """How many trailing dotted parts two names share (``m1.Decode.time_x``, ``m2.Decode.time_x``: 2)."""
    pa, pb = a.split("."), b.split(".")
    n = 0
    while n < min(len(pa), len(pb)) and pa[-1 - n] == pb[-1 - n]:
        n += 1
    return n


def _key(row: Row) -> tuple[str, str, str]:
    return row.machine, json.dumps(dict(row.params), sort_keys=True, default=str), row.unit or ""


def _suffixes(rows: Sequence[Row]) -> dict[tuple[str, ...], list[Row]]:
    """Each trailing run of dotted parts (1, 2, ... all) -> the rows whose names end so."""
    index: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    for row in rows:
        parts = tuple(row.benchmark.split("."))
        for n in range(1, len(parts) + 1):
            index[parts[-n:]].append(row)
    return index


def _closest(row: Row, index: Mapping[tuple[str, ...], list[Row]]) -> Row | None:
    """The one indexed row whose name ends most like ``row``'s (one part at least), None on a tie."""
    parts = tuple(row.benchmark.split("."))
    for n in range(len(parts), 0, -1):
        hits = index.get(parts[-n:])
        if hits:
            return hits[0] if len(hits) == 1 else None
    return None


def _moved(old: str, new: str) -> tuple[str, str]:
    """The parts of two names before the trailing parts they share: what the rename changed."""
    n = _tail(old, new)
    return ".".join(old.split(".")[:-n]), ".".join(new.split(".")[:-n])


def renames(rows: Iterable[Row]) -> list[Rename]:
    """Cases measured at base only paired with cases measured at head only (module docstring), in the old rows'
    order. A pair that shares only its method name stands only beside another of the same move (``A`` ->
    ``B`` for two of A's methods, or for two parameter cases): asv's template ``benchmark_dummy.TimeSuite.time_keys``
    paired with a new class's ``time_keys`` in Kedro's results (a review)."""
    listed = list(rows)
    gone: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    new: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for row in listed:
        if row.status in (MISSING, REMOVED) and row.base_status == SIDE_OK:
            gone[_key(row)].append(row)
        elif row.status == NEW:
            new[_key(row)].append(row)
    found = []
    for key, olds in gone.items():
        to_index, from_index = _suffixes(new.get(key, [])), _suffixes(olds)
        for old in olds:
            to = _closest(old, to_index)
            if to is not None and _closest(to, from_index) is old:  # the closest both ways: one pairing only
                found.append(Rename(old, to))
    moves = Counter(_moved(r.old.benchmark, r.new.benchmark) for r in found)
    kept = [r for r in found if _tail(r.old.benchmark, r.new.benchmark) >= MIN_TAIL
            or moves[_moved(r.old.benchmark, r.new.benchmark)] >= MIN_MOVES]
    order = {id(row): i for i, row in enumerate(listed)}
    return sorted(kept, key=lambda r: order[id(r.old)])


def _literal(name: str) -> str:
    """``name`` as an fnmatch pattern that matches it alone (``[``, ``*`` and ``?`` bracketed)."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in name)


def removal_patterns(found: Sequence[Rename], rows: Iterable[Row]) -> list[str]:
    """What to add to ``removed`` to declare the renamed cases' old names gone and nothing else: ``module.*`` where
    every benchmark of the old names' module in ``rows`` is one of them (a class renamed in its module keeps the
    module: a pattern would cover the new names too); else the old benchmark's name where every case of it that
    base measured is renamed; else each renamed case (``name(k=v, ...)``, ``config.case_text``)."""
    listed = list(rows)
    old = {r.old.benchmark for r in found}
    renamed = {(r.old.benchmark, case_text(r.old.benchmark, case_params(r.old.params))) for r in found}
    seen: dict[str, set[str]] = defaultdict(set)
    measured: dict[str, set[str]] = defaultdict(set)
    for row in listed:
        seen[row.benchmark.split(".")[0]].add(row.benchmark)
        if row.base_status == SIDE_OK:
            measured[row.benchmark].add(case_text(row.benchmark, case_params(row.params)))
    cases_of: dict[str, set[str]] = defaultdict(set)
    for name, case in renamed:
        cases_of[name].add(case)
    by_module: dict[str, list[str]] = defaultdict(list)
    for name in sorted(old):
        by_module[name.split(".")[0]].append(name)
    patterns = []
    for module, names in sorted(by_module.items()):
        whole = [n for n in names if measured[n] <= cases_of[n]]  # every case base measured is renamed
        if "." in names[0] and seen[module] <= old and len(whole) == len(names):
            patterns.append(_literal(module) + ".*")
            continue
        for name in names:
            patterns += [_literal(name)] if name in whole else sorted(map(_literal, cases_of[name]))
    return patterns


def renamed_note(found: Sequence[Rename], rows: Sequence[Row], code: Callable[[str], str], *, status: str = MISSING,
                 of: str = "these") -> str:
    """What a report says of the ``status`` rows (missing, or not measured at head) that look renamed, names
    through ``code`` (``of``: what the count is of): how many, the change across the rename, the largest beyond
    its threshold by name (a rename that also slowed down 3.2x hid in a range of ratios: a review) and, for
    missing ones, how to declare the old names gone (:func:`removal_lines`)."""
    found = [r for r in found if r.old.status == status]
    ratios = sorted(r.ratio for r in found if r.ratio is not None)
    span = fmt_ratio(ratios[0]) + (f" to {fmt_ratio(ratios[-1])}" if fmt_ratio(ratios[-1]) != fmt_ratio(ratios[0])
                                   else "") if ratios else ""
    text = (f"{len(found):,} of {of} look{'s' * (len(found) == 1)} renamed: the same method, parameters, unit and "
            "machine under a new name measured at head only" + (f"; head / base across the rename {span}" if span
                                                                else ""))
    beyond = [r for r in found if r.ratio is not None and max(r.ratio, 1 / r.ratio) > 1 + r.old.threshold]
    if beyond:
        worst = max(beyond, key=lambda r: max(r.ratio, 1 / r.ratio))  # type: ignore[type-var]
        text += (f"; {len(beyond):,} of them beyond the threshold, the largest {fmt_ratio(worst.ratio)} "
                 f"({code(worst.old.benchmark)} -> {code(worst.new.benchmark)}), untested")
    text += ". A rename starts new series without history"
    if status != MISSING:
        return text + "."
    return text + ("; if it is one, declare the old names removed in mlaperf.toml (or under [tool.mlaperf] in "
                   "pyproject.toml) and the check passes:")


def toml_string(text: str) -> str:
    """``text`` as an ASCII TOML basic string that reads back as ``text`` (json.dumps writes a character outside the
    BMP as a surrogate pair, which TOML refuses); ``<`` escaped, so the report's marker cannot appear in it."""
    def one(c: str) -> str:
        if c in '"\\':
            return "\\" + c
        if " " <= c <= "~" and c != "<":
            return c
        return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
    return '"' + "".join(map(one, text)) + '"'


def removal_lines(found: Sequence[Rename], rows: Sequence[Row]) -> list[str]:
    """The ``removed`` list of the missing renamed cases (:func:`removal_patterns`) as TOML lines, at most
    :data:`LISTED` patterns."""
    patterns = removal_patterns([r for r in found if r.old.status == MISSING], rows)
    strings = [toml_string(p) for p in patterns]
    shown = [s for s in strings if len(s) <= MAX_PATTERN_CHARS][:LISTED]  # whole or not at all: a cut one breaks TOML
    lines = ["removed = [", *(f"  {s}," for s in shown)]
    if len(strings) > len(shown):
        lines.append(f"  # and {len(strings) - len(shown):,} more: the old names of the rows marked renamed?")
    return [*lines, "]"]
