"""A reviewer's histories of benchmarks that stop running, as asv writes them, ingested for real and detected
night by night and with ``--full``: a deleted asv module retires like a deleted benchmark, at the first full
run without it, the same commit in both modes; a partial run (``asv run --bench``) retires nothing, so no
alert closes one night and reopens the next, nor does a subset of more than half whose suite lists what it left
out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.regressions.test_verdicts_review import Ingest, Values, alerts, noisy, replay, write_history


def _closed_at(doc: dict) -> dict[str, str | None]:
    return {r["benchmark"]: r["closed_at"] and r["closed_at"][:4] for r in doc["regressions"]}


_GONE = ("retired", "benchmark_gone")
_EIGHT_EXPECTED = {("b.K.time_y", 20): ("new", None), ("old.K.time_x", 20): _GONE, ("a.K.time_dropped", 20): _GONE}


def _eight_benchmarks(seed: int, at_33: Callable[[Values], Values]) -> list[Values]:
    """Forty commits of eight benchmarks, three of them +20% from commit 20 (``b.K.time_y``, ``old.K.time_x``,
    ``a.K.time_dropped``); the last two deleted at 30; commit 33 measures ``at_33`` of its values."""
    n = noisy(seed)
    commits: list[Values] = []
    for i in range(40):
        slow = 1.2 if i >= 20 else 1.0
        v: Values = {"a.K.time_1": 1e-3 * n(), "a.K.time_2": 2e-3 * n(), "b.K.time_1": 3e-3 * n(),
                     "b.K.time_2": 4e-3 * n(), "c.K.time_1": 5e-3 * n(), "b.K.time_y": 6e-3 * n() * slow}  # fmt: skip
        if i < 30:
            v |= {"old.K.time_x": 7e-3 * n() * slow, "a.K.time_dropped": 8e-3 * n() * slow}
        commits.append(at_33(v) if i == 33 else v)
    return commits


def test_a_deleted_module_retires_at_the_first_full_run_without_it_and_a_partial_run_retires_nothing(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eight benchmarks, three of them +20% from commit 20: at 30 module ``old`` is deleted and so is
    ``a.K.time_dropped`` (its module stays), the 6 others run (a full run); commit 33 is ``asv run --bench
    b.K.time_1`` (one benchmark of ``b``, without ``b.K.time_y``), commit 34 the whole suite again."""
    commits = _eight_benchmarks(6, lambda v: {"b.K.time_1": v["b.K.time_1"]})
    folders = write_history(tmp_path / "r", commits)
    nightly, full, nights = replay(tmp_path, folders, ingest, capsys, 29)
    expected = _EIGHT_EXPECTED
    assert alerts(full) == alerts(nightly) == expected
    for i in range(30, 40):  # retired the night of the full run without them; time_y never closes
        assert alerts(nights[i]) == expected, i
    assert _closed_at(full) == _closed_at(nightly) == {"b.K.time_y": None, "old.K.time_x": "0030",
                                                       "a.K.time_dropped": "0030"}  # fmt: skip


def test_a_subset_of_more_than_half_retires_nothing_its_suite_still_lists(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """As asv writes ``asv run --bench``: the results hold the selected benchmarks, benchmarks.json the whole
    suite. Eight benchmarks, three +20% from 20; at 30 ``old.K.time_x`` (its module) and ``a.K.time_dropped``
    are deleted; commit 33 selects 5 of the 6 left, not ``b.K.time_y``: a full run by share, but its suite lists
    time_y, so time_y's alert stays open that night and after (it never closes and reopens), while the
    deleted two retire at 30 as before. Without the listing (the share rule alone) time_y retired at 33."""
    commits = _eight_benchmarks(8, lambda v: {k: x for k, x in v.items() if k != "b.K.time_y"})
    expected = _EIGHT_EXPECTED
    for listing, night_33 in (({33: ["b.K.time_y"]}, expected), ({}, {**expected, ("b.K.time_y", 20): _GONE})):
        root = tmp_path / ("listed" if listing else "share")
        folders = write_history(root / "r", commits, listed=listing)
        nightly, full, nights = replay(root, folders, ingest, capsys, 29)
        assert alerts(nights[30]) == alerts(nights[32]) == expected, listing
        assert alerts(nights[33]) == night_33, listing
        assert alerts(full) == alerts(nightly) == expected, listing
        assert _closed_at(full) == _closed_at(nightly) == {"b.K.time_y": None, "old.K.time_x": "0030",
                                                           "a.K.time_dropped": "0030"}  # fmt: skip


def test_runs_that_may_be_partial_retire_nothing_until_a_full_run(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer's history: six benchmarks, three +20% from commit 20; ``old.K.time_x`` (its whole
    module) and ``gone.K.time_dropped`` stop at 30; ``back.K.time_y`` is not measured at 30-32 and back
    at 33. Runs 30-32 measured 3 of the 6 benchmarks: as partial as a run of one module, and nothing tells
    time_y from the deleted ones there, so nothing retires (time_y never closes and reopens). Run 33 (4 of
    6) is full: the two deleted ones retire there, in both modes."""
    n = noisy(7)
    commits: list[Values] = []
    for i in range(40):
        slow = 1.2 if i >= 20 else 1.0
        v: Values = {"gone.K.time_kept": 1e-3 * n(), "back.K.time_kept": 1e-3 * n(), "other.K.time_z": 1e-3 * n()}
        if i < 30:
            v |= {"gone.K.time_dropped": 2e-3 * n() * slow, "old.K.time_x": 3e-3 * n() * slow}
        if not 30 <= i < 33:
            v["back.K.time_y"] = 4e-3 * n() * slow
        commits.append(v)
    folders = write_history(tmp_path / "r", commits)
    nightly, full, nights = replay(tmp_path, folders, ingest, capsys, 29)
    gone = ("retired", "benchmark_gone")
    open_ = {("back.K.time_y", 20): ("new", None), ("old.K.time_x", 20): ("new", None),
             ("gone.K.time_dropped", 20): ("new", None)}  # fmt: skip
    for i in (30, 31, 32):
        assert alerts(nights[i]) == open_, i
    expected = {**open_, ("old.K.time_x", 20): gone, ("gone.K.time_dropped", 20): gone}
    assert alerts(nights[33]) == alerts(nightly) == alerts(full) == expected
    assert _closed_at(full) == _closed_at(nightly) == {"back.K.time_y": None, "old.K.time_x": "0033",
                                                       "gone.K.time_dropped": "0033"}  # fmt: skip


def test_a_commit_measured_late_moves_where_a_benchmark_is_gone(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """``old.K.time_x`` is +20% from 15 and deleted at 26; the nightly measures 26 last (a gap it fills later,
    with the current suite). It retires the alert at 27 first; once 26 is in, both modes say 26."""
    n = noisy(8)
    commits: list[Values] = []
    for i in range(40):
        v: Values = {"a.K.time_1": 1e-3 * n(), "a.K.time_2": 2e-3 * n(), "b.K.time_1": 3e-3 * n()}
        if i < 26:
            v["old.K.time_x"] = 7e-3 * n() * (1.2 if i >= 15 else 1.0)
        commits.append(v)
    folders = write_history(tmp_path / "r", commits)
    order = [*folders[:26], *folders[27:], folders[26]]
    nightly, full, nights = replay(tmp_path, order, ingest, capsys, 25)
    assert _closed_at(nights[27]) == {"old.K.time_x": "0027"}
    assert alerts(full) == alerts(nightly) == {("old.K.time_x", 15): ("retired", "benchmark_gone")}
    assert _closed_at(full) == _closed_at(nightly) == {"old.K.time_x": "0026"}
