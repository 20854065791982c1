"""Alert groups in the store: steps 6 and 9 of the pipeline in :mod:`regressions.store`. Regressions of one
machine whose culprit ranges overlap share a group (``policy.best_group``); its members that count
(``policy.counts_in_kind``: not the transient ones) are counted against the series measured at the group's
commit (``policy.is_machine_wide``) once this run's statuses are written. A group's range is the overlap of
its members' current ranges: when members move (backfilled commits place their step elsewhere), :func:`refit_groups`
narrows or widens it again, and members that no longer overlap the rest leave it to be grouped anew. Members
that still overlap stay (a group's id is what the nightly's issue follows), so where ranges overlap several
ways night by night may share members out otherwise than ``--full``'s fresh grouping. Sessions are the caller's.
"""

from __future__ import annotations

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from db.models import AlertGroup, Regression, Result, Run, utcnow
from regressions import policy


def _span(pos: dict[int, int], parent_id: int | None, commit_id: int) -> tuple[int, int]:
    """A culprit range ``(parent, commit]`` as positions in history (no parent: the commit alone)."""
    c = pos[commit_id]
    return (pos[parent_id] if parent_id is not None and parent_id in pos else c - 1), c


def refit_groups(session: Session, group_ids: set[int], pos: dict[int, int]) -> list[Regression]:
    """Each group's range made the overlap of its members' current ranges again, members taken in the
    order :func:`assign_groups` takes them (commit, then id); a member that does not overlap the ones before
    it leaves the group. Returns those members (ungrouped now, for :func:`assign_groups`)."""
    left: list[Regression] = []
    for gid in sorted(group_ids):
        group = session.get(AlertGroup, gid)
        members = list(session.execute(select(Regression).where(Regression.group_id == gid)).scalars())
        if group is None or not members:
            continue
        members.sort(key=lambda r: (pos.get(r.commit_id, -1), r.id))
        lo, hi = _span(pos, members[0].parent_commit_id, members[0].commit_id)
        group.commit_id, group.parent_commit_id = members[0].commit_id, members[0].parent_commit_id
        for reg in members[1:]:
            rlo, rhi = _span(pos, reg.parent_commit_id, reg.commit_id)
            if policy.overlap((lo, hi), (rlo, rhi)) <= 0:
                reg.group_id = None
                left.append(reg)
                continue
            if rhi < hi:
                hi, group.commit_id = rhi, reg.commit_id
            if rlo > lo:
                lo, group.parent_commit_id = rlo, reg.parent_commit_id
    session.flush()
    return left


def assign_groups(session: Session, regs: list[Regression], pos: dict[int, int]) -> tuple[set[int], list[int]]:
    """Step 6: put each regression into the group of its machine whose commit range its own range
    ``(parent, commit]`` overlaps most (``policy.best_group``; the group's range narrows to the overlap),
    else into a new group. Returns the ids of the groups that changed and of those created."""
    touched: set[int] = set()
    created: list[int] = []

    def span(parent_id: int | None, commit_id: int) -> tuple[int, int]:
        return _span(pos, parent_id, commit_id)

    for mid in sorted({r.machine_id for r in regs}):
        mine = sorted((r for r in regs if r.machine_id == mid), key=lambda r: (pos[r.commit_id], r.id))
        lowest = min(span(r.parent_commit_id, r.commit_id)[0] for r in mine)
        groups = [
            g
            for g in session.execute(select(AlertGroup).where(AlertGroup.machine_id == mid)).scalars()
            if pos.get(g.commit_id, -1) > lowest
        ]
        for reg in mine:
            lo, hi = span(reg.parent_commit_id, reg.commit_id)
            i = policy.best_group((lo, hi), [span(g.parent_commit_id, g.commit_id) for g in groups])
            if i is None:
                best = AlertGroup(machine_id=mid, commit_id=reg.commit_id, parent_commit_id=reg.parent_commit_id,
                                  machine_wide=False, series=0, created_at=utcnow())  # fmt: skip
                session.add(best)
                session.flush()
                groups.append(best)
                created.append(best.id)
            else:
                best = groups[i]
                glo, ghi = span(best.parent_commit_id, best.commit_id)
                if hi < ghi:
                    best.commit_id = reg.commit_id
                if lo > glo:
                    best.parent_commit_id = reg.parent_commit_id
            reg.group_id = best.id
            touched.add(best.id)
    session.flush()
    return touched, created


def merge_same_range(session: Session, group_ids: set[int]) -> tuple[set[int], set[int]]:
    """Groups of one machine that hold the same range ``(parent, commit]`` now (their members' steps moved onto
    one culprit night by night, where ``--full`` finds one group) become one: the later groups' members join the
    earliest, whose id the nightly's issue follows, and the later groups go. Of ``group_ids`` and the groups that
    share their ranges; returns the groups that gained members and the ids removed."""
    kept: set[int] = set()
    gone: set[int] = set()
    for gid in sorted(group_ids):
        group = session.get(AlertGroup, gid) if gid not in gone else None
        if group is None:
            continue
        parent = group.parent_commit_id
        same = list(session.execute(
            select(AlertGroup).where(AlertGroup.machine_id == group.machine_id, AlertGroup.commit_id == group.commit_id,
                                     AlertGroup.parent_commit_id.is_(None) if parent is None
                                     else AlertGroup.parent_commit_id == parent).order_by(AlertGroup.id)
        ).scalars())  # fmt: skip
        for other in same[1:]:
            for reg in session.execute(select(Regression).where(Regression.group_id == other.id)).scalars():
                reg.group_id = same[0].id
            session.flush()
            session.expire(other, ["regressions"])  # emptied: its deletion leaves the members where they went
            session.delete(other)
            gone.add(other.id)
            kept.add(same[0].id)
    session.flush()
    return kept, gone


def count_groups(session: Session, group_ids: set[int], provenance: list[int]) -> None:
    """Recount each group's series base (series measured on its machine at its commit) and decide whether
    it is machine-wide (``policy.is_machine_wide``) from its members that count (``policy.counts_in_kind``:
    not the transient ones), so after the statuses of this run are written."""
    if not group_ids:
        return
    session.flush()
    groups = list(session.execute(select(AlertGroup).where(AlertGroup.id.in_(group_ids))).scalars())
    members: dict[int, int] = {}
    for gid, status, k in session.execute(
        select(Regression.group_id, Regression.status, func.count(Regression.id))
        .where(Regression.group_id.in_(group_ids))
        .group_by(Regression.group_id, Regression.status)
    ).all():
        members[int(gid)] = members.get(int(gid), 0) + (int(k) if policy.counts_in_kind(status) else 0)
    measured_series = (
        select(Run.machine_id, Run.commit_id, Result.benchmark_id, Result.params_key)
        .join(Run, Result.run_id == Run.id)
        .where(
            tuple_(Run.machine_id, Run.commit_id).in_(sorted({(g.machine_id, g.commit_id) for g in groups})),
            Result.value.is_not(None),
            Result.benchmark_id.not_in(provenance),
        )
        .distinct()
        .subquery()
    )
    counts = {
        (int(m), int(c)): int(k)
        for m, c, k in session.execute(
            select(measured_series.c.machine_id, measured_series.c.commit_id, func.count()).group_by(
                measured_series.c.machine_id, measured_series.c.commit_id
            )
        )
    }
    for g in groups:
        g.series = counts.get((g.machine_id, g.commit_id), 0)
        g.machine_wide = policy.is_machine_wide(int(members.get(g.id, 0)), g.series)
