"""Alert groups in the store: step 6 of the pipeline in :mod:`regressions.store`. Regressions of one
machine whose culprit ranges overlap share a group (``policy.best_group``), counted against the series
measured at the group's commit (``policy.is_machine_wide``). Sessions are the caller's.
"""

from __future__ import annotations

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from db.models import AlertGroup, Regression, Result, Run, utcnow
from regressions import policy


def assign_groups(session: Session, regs: list[Regression], pos: dict[int, int]) -> tuple[set[int], list[int]]:
    """Step 6: put each regression into the group of its machine whose commit range its own range
    ``(parent, commit]`` overlaps most (``policy.best_group``; the group's range narrows to the overlap),
    else into a new group. Returns the ids of the groups that changed and of those created."""
    touched: set[int] = set()
    created: list[int] = []

    def span(parent_id: int | None, commit_id: int) -> tuple[int, int]:
        c = pos[commit_id]
        return (pos[parent_id] if parent_id is not None and parent_id in pos else c - 1), c

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


def count_groups(session: Session, group_ids: set[int], provenance: list[int]) -> None:
    """Recount each group's series base (series measured on its machine at its commit) and decide whether
    it is machine-wide (``policy.is_machine_wide``)."""
    if not group_ids:
        return
    groups = list(session.execute(select(AlertGroup).where(AlertGroup.id.in_(group_ids))).scalars())
    members = dict(
        session.execute(
            select(Regression.group_id, func.count(Regression.id))
            .where(Regression.group_id.in_(group_ids))
            .group_by(Regression.group_id)
        ).all()
    )
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
