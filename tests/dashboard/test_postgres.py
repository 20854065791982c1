"""The dashboard on a PostgreSQL store (read-only transactions), through the same pages."""

from __future__ import annotations

import pytest
from conftest import MLA_MACHINE, Seeded
from test_pages import app, figures, goto

pytestmark = pytest.mark.postgres


def test_pages_on_postgres(monkeypatch: pytest.MonkeyPatch, pg_seeded: Seeded) -> None:
    at = app(monkeypatch, pg_seeded.url)
    assert at.sidebar.selectbox(key="machine").value == MLA_MACHINE
    assert {m.label: m.value for m in at.metric}["Commits"] == "6"
    assert len(figures(goto(at, "throughput"))) == 3
    assert len(figures(goto(at, "history"))) == 1
    assert list(goto(at, "regressions").dataframe[0].value["ratio"]) == [pytest.approx(1.3)]
    assert len(figures(goto(at, "efficiency"))) == 6
    assert goto(at, "compare").metric[0].value == "184"  # the two newest commits, every MLA series
