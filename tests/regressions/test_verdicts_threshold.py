"""A reviewer's storing runs of ``detect --threshold`` on a store with confirmed alerts, ingested for real:
an alert whose step is within a higher threshold closes as ``below_threshold`` (not refuted: its runs still
sit at the step) at the commit of the run that closed it, and the default threshold reopens it."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.engine import make_engine
from mlaperf.cli import main
from tests.regressions.test_verdicts_review import Ingest, Values, alerts, detect, noisy, write_history


def _state(doc: dict) -> dict[str, tuple[str, str | None, str | None, str | None]]:
    """benchmark -> (status, close reason, closed_at as its commit index, event) of every alert."""
    return {
        r["benchmark"]: (r["status"], r["close_reason"], r["closed_at"] and r["closed_at"][:4], r["event"])
        for r in doc["regressions"]
    }


def test_a_higher_threshold_closes_as_below_threshold_and_the_default_reopens(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """+7%, +12% and +40% steps at commit 30 of 45, confirmed by 15 runs each (and a flat benchmark)."""
    n = noisy(7)
    commits: list[Values] = [
        {"th.A.time_7": 1e-3 * n() * (1.07 if i >= 30 else 1), "th.B.time_12": 1e-3 * n() * (1.12 if i >= 30 else 1),
         "th.C.time_40": 1e-3 * n() * (1.40 if i >= 30 else 1), "th.D.time_flat": 1e-3 * n()}
        for i in range(46)
    ]  # fmt: skip
    folders = write_history(tmp_path / "r", commits)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    main(["db", "upgrade", "--db", url])
    ingest(make_engine(url), folders[:45])
    opened = ("new", None, None, None)
    assert {k: v[:3] for k, v in _state(detect(url, capsys, "--full")).items()} == dict.fromkeys(
        ["th.A.time_7", "th.B.time_12", "th.C.time_40"], opened[:3]
    )
    below = ("transient", "below_threshold", "0044", "transient")
    doc = detect(url, capsys, "--threshold", "30%")
    assert _state(doc) == {"th.A.time_7": below, "th.B.time_12": below, "th.C.time_40": opened}
    reopened = ("new", None, None, "reopened")
    doc = detect(url, capsys)
    assert _state(doc) == {"th.A.time_7": reopened, "th.B.time_12": reopened, "th.C.time_40": opened}
    # The smaller drift: +7% under 10%, closed by this run (at its newest commit, 44), not refuted.
    doc = detect(url, capsys, "--threshold", "10%")
    assert _state(doc) == {"th.A.time_7": below, "th.B.time_12": opened, "th.C.time_40": opened}
    # A later night at 10% keeps it closed where it closed.
    ingest(make_engine(url), folders[45:])
    doc = detect(url, capsys, "--threshold", "10%")
    assert _state(doc)["th.A.time_7"] == ("transient", "below_threshold", "0044", None)
    doc = detect(url, capsys)
    assert _state(doc)["th.A.time_7"] == reopened


def test_a_higher_threshold_does_not_move_an_alert_onto_a_later_step(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A drift of +4% at commits 30, 38 and 46: at 5% a gradual 8% alert at 38; at 10% the detector flags the
    12% drift at 46, its range reaching back to 30. The 8% alert is within 10%: it closes as below_threshold where
    it stands, and the 12% drift is an alert of its own (the 8% one was moved onto it; a review on geocat-comp)."""
    n = noisy(11)
    commits: list[Values] = [{"th.M.time_m": 1e-3 * n() * 1.04 ** ((i >= 30) + (i >= 38) + (i >= 46))}
                             for i in range(60)]  # fmt: skip
    folders = write_history(tmp_path / "r", commits)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    main(["db", "upgrade", "--db", url])
    ingest(make_engine(url), folders)
    at_5 = alerts(detect(url, capsys, "--full"))
    assert at_5 == {("th.M.time_m", 38): ("new", None)}, at_5
    at_10 = alerts(detect(url, capsys, "--threshold", "10%"))
    assert at_10 == {("th.M.time_m", 38): ("transient", "below_threshold"), ("th.M.time_m", 46): ("new", None)}, at_10
    # Back at 5%: the 8% alert reopens; the 4% step at 46 is no alert at 5%, so the 12% one is not seen there.
    back = alerts(detect(url, capsys))
    assert back == {("th.M.time_m", 38): ("new", None), ("th.M.time_m", 46): ("transient", "not_seen")}, back
