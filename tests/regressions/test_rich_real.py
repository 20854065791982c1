"""Textualize/rich's real asv results (tests/fixtures/asv-rich): one machine measured in two asv environments at
two benchmark versions, months apart (March 2022 with the old suite, June with the new one over part of the same
commits), so the version of a series changes at almost every other commit. A review saw a +25% step go unflagged
on 9 of these files (the step on a version boundary there, never flagged by design); a rule that dropped the old
suite's values between the new one's found it there but, on the fuller history, threw away the values that pin the
commit. Detection here finds the step at its commit from the old suite's values, and its return."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from regressions.config import Settings
from regressions.listing import regressions_frame
from regressions.store import detect_store

Ingest = Callable[[Engine, list[Path]], None]
ROOT = Path(__file__).resolve().parents[2]
RICH = ROOT / "tests" / "fixtures" / "asv-rich" / "results"
MACHINE = RICH / "darrenburns-2022-mbp"
WRAPPING = "benchmarks.TextSuite.time_wrapping"


def _value(commit: str, env: str) -> float:
    """What asv wrote for the wrapping benchmark at ``commit`` in environment ``env`` (the file's name suffix)."""
    (path,) = MACHINE.glob(f"{commit}-virtualenv-py3.10{env}.json")
    doc = json.loads(path.read_text())
    row = dict(zip(doc["result_columns"], doc["results"][WRAPPING], strict=False))
    return float(row["result"][0])


def test_a_step_between_two_suites_values_is_found_at_its_commit(engine: Engine, ingest: Ingest) -> None:
    ingest(engine, [RICH])
    with Session(engine) as s, s.begin():
        detect_store(s, Settings(), full=True)
    with Session(engine) as s:
        frame = regressions_frame(s)
    (row,) = frame[frame["benchmark"] == WRAPPING].itertuples()
    # The old suite measured 008854c4 at 1.10 ms and 07d51ffc at 1.36 ms; the new suite measured neither.
    assert (row.parent[:8], row.sha[:8]) == ("008854c4", "07d51ffc"), (row.parent, row.sha)
    step = _value("07d51ffc", "") / _value("008854c4", "")
    assert 1.2 < step < 1.3 and 1.15 < row.ratio < 1.3, (step, row.ratio)
    # Back at 416033ff, which only the new suite measured: the same level in both suites, so the alert is fixed.
    assert (row.status, row.close_reason, str(row.fixed_sha)[:8]) == ("fixed", "returned", "416033ff"), row
    assert abs(_value("5f021978", "-setuptools59.2.0") / _value("5f021978", "") - 1) < 0.01
