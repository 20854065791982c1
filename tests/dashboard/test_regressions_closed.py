"""The Regressions page's closed steps (issue 27 item 8): fixed, transient, retired and ignored regressions
with their reason, filterable by status and reason through the URL; a status the page does not know yet
shows as itself."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIX_FROM, MLA_MACHINE, Seeded
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from test_pages import app, goto, table

from dashboard import closed, triage


def _listing(statuses: list[str], labels: list[object] | None = None, **extra: list[object]) -> pd.DataFrame:
    n = len(statuses)
    regs = pd.DataFrame({
        "id": range(1, n + 1), "machine": ["m"] * n, "benchmark": ["b.c.time_x"] * n,
        "params_key": ['{"n": "1"}'] * n, "sha": [f"{i:040x}" for i in range(n)], "parent_sha": [None] * n,
        "fixed_sha": ["f" * 40 if s == "fixed" else None for s in statuses], "before": [1.0] * n,
        "after": [1.2] * n, "ratio": [1.2] * n, "direction": ["up_is_worse"] * n, "status": statuses,
        "group": range(1, n + 1), "labels": labels or [None] * n, **extra,
    })
    return triage.enrich(regs, {}, {})


def test_closed_steps_read_statuses_and_reasons_generically() -> None:
    regs = _listing(["new", "transient", "fixed", "superseded"],
                    labels=[None, ["returns_to_earlier_level"], None, None],
                    close_reason=[None, None, None, "segment ended"])
    rows = closed.closed_steps(regs)
    assert list(rows["status"]) == ["transient", "fixed", "superseded"]  # open ones are not closed steps
    by = dict(zip(rows["status"], rows["reason"], strict=True))
    assert by["transient"].startswith("transient: refuted") and "returns_to_earlier_level" in by["transient"]
    assert by["fixed"] == "fixed: came back to its earlier level at ffffffff"
    assert by["superseded"] == "superseded: segment ended"  # a status and reason recorded by a newer detector
    kinds = dict(zip(rows["status"], rows["reason_kind"], strict=True))
    assert kinds == {"transient": "returns_to_earlier_level", "fixed": "fixed", "superseded": "segment ended"}
    assert list(closed.filter_closed(rows, ["fixed", "transient"], ["fixed"])["status"]) == ["fixed"]
    assert closed.closed_steps(regs.iloc[:0]).empty


def test_page_lists_closed_steps_filtered_by_the_url(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded) -> None:
    from db.engine import make_engine
    from db.models import Machine, Regression

    engine = make_engine(writable_copy.url)
    with Session(engine) as s, s.begin():
        mid = s.scalars(select(Machine.id).where(Machine.name == MLA_MACHINE)).one()
        first = s.scalars(select(Regression.id).where(Regression.machine_id == mid).order_by(Regression.id)).first()
        s.execute(update(Regression).where(Regression.id == first)
                  .values(status="transient", labels=["returns_to_earlier_level"], fixed_commit_id=None,
                          close_reason=None))  # a row from before close reasons were recorded
    engine.dispose()

    at = goto(app(monkeypatch, writable_copy.url), "regressions")
    rows = table(at, "reason")
    assert set(rows["status"]) == {"fixed", "transient"}
    assert rows.loc[rows["status"] == "fixed", "reason"].str.contains(writable_copy.shas[FIX_FROM][:8]).all()
    # A shared link picks the closed status and the reason.
    at = goto(app(monkeypatch, writable_copy.url, query={"reg_closed_status": "transient"}), "regressions")
    rows = table(at, "reason")
    assert list(rows["status"]) == ["transient"] and "refuted" in rows["reason"].iloc[0]
    at = goto(app(monkeypatch, writable_copy.url, query={"reg_reason": "returns_to_earlier_level"}), "regressions")
    assert list(table(at, "reason")["status"]) == ["transient"]
