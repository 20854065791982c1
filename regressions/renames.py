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
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from regressions.compare import MISSING, NEW, REMOVED, SIDE_OK, change_ratio


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


def _closest(row: Row, others: Sequence[Row]) -> Row | None:
    """The one row of ``others`` whose name ends most like ``row``'s (one part at least), None on a tie."""
    scored = [(_tail(row.benchmark, o.benchmark), i) for i, o in enumerate(others)]
    best = max((s for s, _ in scored), default=0)
    hits = [i for s, i in scored if s == best]
    return others[hits[0]] if best and len(hits) == 1 else None


def renames(rows: Iterable[Row]) -> list[Rename]:
    """Cases measured at base only paired with cases measured at head only (module docstring), in the old rows'
    order."""
    gone: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    new: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for row in rows:
        if row.status in (MISSING, REMOVED) and row.base_status == SIDE_OK:
            gone[_key(row)].append(row)
        elif row.status == NEW:
            new[_key(row)].append(row)
    found = []
    for key, olds in gone.items():
        for old in olds:
            to = _closest(old, new.get(key, []))
            if to is not None and _closest(to, olds) is old:  # the closest both ways: one pairing only
                found.append(Rename(old, to))
    return found


def removal_patterns(found: Sequence[Rename], rows: Iterable[Row]) -> list[str]:
    """What to add to ``removed`` to declare the renamed cases' old names gone: ``module.*`` where every benchmark
    of the old names' module in ``rows`` is one of them (a class renamed in its module keeps the module: a pattern
    would cover the new names too), else each old benchmark name."""
    old = {r.old.benchmark for r in found}
    seen: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        seen[row.benchmark.split(".")[0]].add(row.benchmark)
    patterns = []
    for module in sorted({name.split(".")[0] for name in old}):
        names = sorted(n for n in old if n.split(".")[0] == module)
        patterns += [f"{module}.*"] if "." in names[0] and seen[module] <= old else names
    return patterns
