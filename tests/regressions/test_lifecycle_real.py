"""An alert's life on third-party noise: the vendored OpenBLAS history of gha-aws-skylake (copied, then edited
as a suite's life edits it: a benchmark's asv version bumped, old commits measured again with today's suite, a
parameter value dropped, a machine slow for one night and measured again), ingested and detected night by night
as the nightly does."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from regressions.config import Settings
from regressions.listing import regressions_frame
from regressions.store import OPEN_STATUSES, detect_store

ROOT = Path(__file__).resolve().parents[2]
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"
MACHINE = "gha-aws-skylake"
GEMM = "benchmarks.gemm.time_gemm"
V2 = "b" * 64
Ingest = Callable[[Engine, list[Path]], None]

pytestmark = pytest.mark.skipif(not OPENBLAS.exists(), reason="vendored OpenBLAS results missing")


def _runs() -> list[dict[str, Any]]:
    """The machine's asv result documents in the order they ran."""
    docs = [json.loads(p.read_text()) for p in (OPENBLAS / MACHINE).glob("*.json") if p.name != "machine.json"]
    return sorted(docs, key=lambda d: d["date"])


def _edit(doc: dict[str, Any], bench: str, *, version: str | None = None, factor: float = 1.0, later: int = 0
          ) -> None:  # fmt: skip
    """``bench``'s results in ``doc`` at another asv version and/or ``factor`` times the time (result, CI,
    quartiles and samples alike), and with ``later`` (ms) measured that much later."""
    names = doc["result_columns"]
    row = dict(zip(names, doc["results"][bench], strict=False))
    if version is not None:
        row["version"] = version
    if later:
        doc["date"] += later
        row["started_at"] += later
    for col in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        if row.get(col) is not None:
            row[col] = [None if v is None else v * factor for v in row[col]]
    if row.get("samples") is not None:
        row["samples"] = [None if s is None else [x * factor for x in s] for s in row["samples"]]
    doc["results"][bench] = [row.get(n) for n in names]


def _write(folder: Path, docs: list[dict[str, Any]], suite: dict[str, Any]) -> Path:
    (folder / MACHINE).mkdir(parents=True, exist_ok=True)
    (folder / MACHINE / "machine.json").write_bytes((OPENBLAS / MACHINE / "machine.json").read_bytes())
    (folder / "benchmarks.json").write_text(json.dumps(suite))
    for d in docs:
        (folder / MACHINE / f"{d['commit_hash'][:8]}-{d['env_name']}-{d['date']}.json").write_text(json.dumps(d))
    return folder


def _measured_again(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """gemm of ``runs`` measured again later with today's suite (version 2, 1.5x the time): the backlog."""
    backlog = []
    for d in runs:
        again = copy.deepcopy(d)
        again["results"] = {GEMM: again["results"][GEMM]}
        _edit(again, GEMM, version=V2, factor=1.5, later=10**9)
        backlog.append(again)
    return backlog


def _nights(engine: Engine, ingest: Ingest, tmp: Path, nights: Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]
            ) -> None:  # fmt: skip
    for n, (docs, suite) in enumerate(nights):
        ingest(engine, [_write(tmp / f"night{n}", docs, suite)])
        with Session(engine) as s, s.begin():
            detect_store(s, Settings())


def _open(engine: Engine, bench: str) -> list[tuple[str, str]]:
    with Session(engine) as s:
        frame = regressions_frame(s, statuses=OPEN_STATUSES)
    return sorted(zip(frame.loc[frame["benchmark"] == bench, "sha"], frame.loc[frame["benchmark"] == bench, "status"],
                      strict=True))  # fmt: skip


def test_old_commits_measured_again_at_a_new_version_make_no_step(engine: Engine, ingest: Ingest, tmp_path: Path
                                                                   ) -> None:  # fmt: skip
    """gemm's code changes at run 70 (a new asv version timing a problem 1.5x as long: nothing got slower);
    then the backlog measures runs 50-69 again with today's suite. asv's own results file keeps the last run
    of a commit; the store keeps both, and pooling them put a level halfway between the versions at 50-69
    and a 1.2x 'regression' on all 24 gemm series where the version changed. The last version measured at a
    commit is the one detection sees."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    suite2 = copy.deepcopy(suite)
    suite2[GEMM]["version"] = V2
    for d in runs[70:]:
        _edit(d, GEMM, version=V2, factor=1.5)
    _nights(engine, ingest, tmp_path, iter([(runs[:70], suite), *(([d], suite2) for d in runs[70:])]))
    opened_before = _open(engine, GEMM)
    backlog = _measured_again(runs[50:70])
    _nights(engine, ingest, tmp_path / "backlog", iter([(backlog[10:], suite2), (backlog[:10], suite2)]))
    bump = runs[70]["commit_hash"]
    assert not [a for a in _open(engine, GEMM) if a[0] == bump], "an alert where only the version changed"
    assert _open(engine, GEMM) == opened_before  # the real history's own gemm alerts are untouched


@pytest.mark.parametrize(("bump", "hiccup"), [(70, True), (66, False)])
def test_a_confirmed_regression_outlives_a_version_bump(engine: Engine, ingest: Ingest, tmp_path: Path, bump: int,
                                                        hiccup: bool) -> None:  # fmt: skip
    """gemm 25% slower from run 50 on, for good; its asv version changes at ``bump`` without changing its time.
    Whether the new version continues the old level was decided on its first run alone: a machine-wide hiccup
    on that run (every benchmark 30% slower once), or at run 66 the real noise alone, retired all 24 open
    alerts (segment_ended) and closed their issue while every later run sat at the regressed level. The median
    of the new version's first three runs decides now, and nothing retires before they exist."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    suite2 = copy.deepcopy(suite)
    suite2[GEMM]["version"] = V2
    for d in runs[50:]:
        _edit(d, GEMM, factor=1.25)
    for d in runs[bump:]:
        _edit(d, GEMM, version=V2)
    if hiccup:
        for bench in runs[bump]["results"]:
            _edit(runs[bump], bench, factor=1.3)
    _nights(engine, ingest, tmp_path, iter([(runs[:bump], suite), *(([d], suite2) for d in runs[bump:])]))
    step = runs[50]["commit_hash"]
    with Session(engine) as s:
        frame = regressions_frame(s)
    at_step = frame[(frame["benchmark"] == GEMM) & (frame["sha"] == step)]
    assert len(at_step) == 24
    still_open = at_step["status"].isin(OPEN_STATUSES)
    assert still_open.sum() >= 22, at_step[["status", "close_reason"]].value_counts()


def _without_last_size(doc: dict[str, Any], bench: str) -> None:
    """``bench`` run with the last value of its first parameter dropped from its grid (asv's per-combination
    columns are the grid's product in order, so that value's combinations are the last ones)."""
    names = doc["result_columns"]
    row = dict(zip(names, doc["results"][bench], strict=False))
    sizes, *others = row["params"]
    n = len(sizes)
    keep = (n - 1) * int(np.prod([len(o) for o in others]))
    for col, value in row.items():
        if col not in ("params", "version", "started_at", "duration") and isinstance(value, list) and value:
            assert len(value) % n == 0, col
            row[col] = value[:keep]
    row["params"] = [sizes[:-1], *others]
    doc["results"][bench] = [row.get(c) for c in names]


def _gemm_slower_size_dropped(dropped: slice) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The machine's runs with gemm 25% slower from run 50 and size 1000 left out of its grid at ``dropped``; the
    suite, and the suite without size 1000."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    suite2 = copy.deepcopy(suite)
    suite2[GEMM]["params"][0] = suite2[GEMM]["params"][0][:-1]
    for d in runs[50:]:
        _edit(d, GEMM, factor=1.25)
    for d in runs[dropped]:
        _without_last_size(d, GEMM)
    return runs, suite, suite2


def _gemm_at(engine: Engine, sha: str) -> dict[str, tuple[str, str | None, str | None]]:
    """gemm's alerts at commit ``sha``: {params: (status, close reason, closed at)}."""
    with Session(engine) as s:
        f = regressions_frame(s)
    f = f[(f["benchmark"] == GEMM) & (f["sha"] == sha)]
    return {json.dumps(p, sort_keys=True): (st, r, c) for p, st, r, c in
            zip(f["params"], f["status"], f["close_reason"], f["closed_sha"], strict=True)}  # fmt: skip


def test_alerts_of_a_dropped_parameter_value_retire(engine: Engine, ingest: Ingest, tmp_path: Path) -> None:
    """gemm at size 1000 (4 series) 25% slower from run 50 on, never fixed; from run 60 the suite's grid no
    longer has size 1000 (asv's version does not change with the parameters) while gemm runs every night. Its
    alerts stayed `new` for good, an issue open on a series nothing measures; they retire (`series_gone`) at
    run 60, night by night as with --full (also after a partial newest run without gemm), and the other sizes'
    series are left alone."""
    runs, suite, suite2 = _gemm_slower_size_dropped(slice(60, None))
    del runs[-1]["results"][GEMM]  # the newest run a partial one (`asv run --bench` without gemm)
    _nights(engine, ingest, tmp_path, iter([(runs[:60], suite), *(([d], suite2) for d in runs[60:])]))

    def gemm_at_step() -> dict[str, tuple[str, str | None, str | None]]:
        return _gemm_at(engine, runs[50]["commit_hash"])

    nightly = gemm_at_step()
    dropped = {k: v for k, v in nightly.items() if json.loads(k)["size"] == "1000"}
    assert len(dropped) == 4 and set(dropped.values()) == {("retired", "series_gone", runs[60]["commit_hash"])}
    assert all(st in OPEN_STATUSES for k, (st, _r, _c) in nightly.items() if k not in dropped)
    with Session(engine) as s, s.begin():
        detect_store(s, Settings(), full=True)
    assert gemm_at_step() == nightly


@pytest.mark.parametrize("after", ["clean", "still slow"])
def test_a_machine_hiccup_measured_again_the_same_night_confirms_nothing(
    engine: Engine, ingest: Ingest, tmp_path: Path, after: str
) -> None:
    """Run 80 finds every benchmark 30% slower (a noisy neighbour); the nightly measures that commit again an
    hour later, the neighbour still there (and, when the next commit is clean, a night whose every result failed
    comes between, deciding nothing). Those two runs made 218 alerts `new` and opened an issue, refuted by
    the next night. Now they stay suspects until the next commit: transient if it is back, new if it is slow
    too (a real change of the whole machine's speed)."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    slow, again = copy.deepcopy(runs[80]), copy.deepcopy(runs[80])
    for bench in list(slow["results"]):
        _edit(slow, bench, factor=1.30)
        _edit(again, bench, factor=1.31, later=3_600_000)
    nxt = copy.deepcopy(runs[81])
    if after == "still slow":
        for bench in list(nxt["results"]):
            _edit(nxt, bench, factor=1.30)
    _nights(engine, ingest, tmp_path, iter([(runs[:80], suite), ([slow], suite)]))

    def at_80() -> dict[str, int]:
        with Session(engine) as s:
            f = regressions_frame(s)
        return f.loc[f["sha"] == runs[80]["commit_hash"], "status"].value_counts().to_dict()

    flagged = at_80()
    assert set(flagged) == {"suspect"} and flagged["suspect"] > 100
    _nights(engine, ingest, tmp_path / "again", iter([([again], suite)]))
    assert at_80() == flagged
    if after == "clean":  # a night whose every result failed first: it measured nothing, so decides nothing
        broken = copy.deepcopy(runs[81])
        names = broken["result_columns"]
        for bench, row in broken["results"].items():
            broken["results"][bench] = [[None] * len(v) if c == "result" else v
                                        for c, v in zip(names, row, strict=False)]  # asv may end a row early
        _nights(engine, ingest, tmp_path / "broken", iter([([broken], suite)]))
        assert at_80() == flagged
        nxt = runs[82]
    _nights(engine, ingest, tmp_path / "next", iter([([nxt], suite)]))
    if after == "clean":
        assert at_80().get("transient", 0) >= 0.95 * flagged["suspect"]  # a few series of real noise stay
    else:
        assert at_80().get("new", 0) >= flagged["suspect"]


def test_frames_read_apart_keep_every_run_of_one_version(engine: Engine, ingest: Ingest, tmp_path: Path) -> None:
    """Incremental detection reads a machine's window and, for series with an old open alert, a wider window of
    their own, then joins them. Version codes made by each read apart named one asv version twice, so at every
    commit in both frames the runs of one "version" were dropped as an older measurement: a series reached back
    lost its whole window, and the nightly's statuses left those of --full."""
    from db.models import Machine
    from db.query_base import last_version_only
    from regressions.results import load_values
    from regressions.segments import newest_commits

    runs = _runs()
    ingest(engine, [_write(tmp_path, runs[:40], json.loads((OPENBLAS / "benchmarks.json").read_text()))])
    with Session(engine) as s:
        mid = s.query(Machine.id).filter(Machine.name == MACHINE).scalar()
        window = newest_commits(s, mid, 10)
        gemm = load_values(s, machine_ids=[mid], series=None, windows={mid: window})
        gemm = gemm[gemm["benchmark_id"] == gemm["benchmark_id"].iloc[0]]
        half = gemm["params_key"].isin(sorted(set(gemm["params_key"]))[:2])
        bid = int(gemm["benchmark_id"].iloc[0])
        reach = {(bid, str(k), mid) for k in gemm.loc[half, "params_key"]}  # as segments._in_windows reads them
        wide = load_values(s, machine_ids=[mid], series=reach, windows={mid: newest_commits(s, mid, 20)})
        joined = pd.concat([wide.iloc[::-1], gemm[~half]], ignore_index=True)  # read apart, another row order
        kept = last_version_only(s, joined, "version", complete=False)
    assert len(kept) == len(joined) > 0


def test_a_version_of_two_runs_followed_by_another_still_ends_the_segment(engine: Engine, ingest: Ingest,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    """gemm 25% slower from run 50; version 2 (twice the time: not joined) runs at 70 and 71 only, version 3 from
    72 on. A version waits for three runs before ending the old segment only while it is the newest: one that a
    later version followed never gets its third, and the old alerts must still retire (segment_ended)."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    for d in runs[50:]:
        _edit(d, GEMM, factor=1.25)
    for d in runs[70:72]:
        _edit(d, GEMM, version="c" * 64, factor=2.0)
    for d in runs[72:]:
        _edit(d, GEMM, version=V2, factor=3.0)
    _nights(engine, ingest, tmp_path, iter([(runs[:70], suite), *(([d], suite) for d in runs[70:])]))
    with Session(engine) as s:
        f = regressions_frame(s)
    at_step = f[(f["benchmark"] == GEMM) & (f["sha"] == runs[50]["commit_hash"])]
    closed = set(zip(at_step["status"], at_step["close_reason"], strict=True))
    assert len(at_step) == 24 and closed == {("retired", "segment_ended")}


def test_one_benchmark_slower_at_the_newest_commit_is_not_the_machine(engine: Engine, ingest: Ingest,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """gemm alone 1.5x slower at run 80, measured again that night with `--bench gemm`. The machine-wide rule for
    the newest commit was counted over the series a run examines, so the re-run's 24 gemm series were "most of
    the machine": suspects night by night, `new` with --full. It counts every series the machine measured there."""
    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    _edit(runs[80], GEMM, factor=1.5)
    again = copy.deepcopy(runs[80])
    again["results"] = {GEMM: again["results"][GEMM]}
    _edit(again, GEMM, factor=1.01, later=3_600_000)
    _nights(engine, ingest, tmp_path, iter([(runs[:80], suite), ([runs[80]], suite), ([again], suite)]))

    def at_80() -> dict[str, int]:
        with Session(engine) as s:
            f = regressions_frame(s)
        mine = (f["sha"] == runs[80]["commit_hash"]) & (f["benchmark"] == GEMM)
        return f.loc[mine, "status"].value_counts().to_dict()

    nightly = at_80()
    assert nightly == {"new": 24}
    with Session(engine) as s, s.begin():
        detect_store(s, Settings(), full=True)
    assert at_80() == nightly


def test_a_dropped_parameter_value_that_returns_reopens_its_alerts(engine: Engine, ingest: Ingest, tmp_path: Path
                                                                   ) -> None:  # fmt: skip
    """gemm at size 1000 25% slower from run 50 on, never fixed; the grid drops size 1000 at runs 60-69 (its alerts
    retire, `series_gone`) and has it again from run 70, still slow. The regression is still there: the alerts
    of the series that came back are open again, as ``--full`` over the same history (a gap, not a retirement)
    decides."""
    runs, suite, suite2 = _gemm_slower_size_dropped(slice(60, 70))

    def gemm_at_step() -> dict[str, tuple[str, str | None]]:
        return {k: (st, r) for k, (st, r, _c) in _gemm_at(engine, runs[50]["commit_hash"]).items()}

    _nights(engine, ingest, tmp_path, iter([(runs[:60], suite), *(([d], suite2) for d in runs[60:70])]))
    gone = {k: v for k, v in gemm_at_step().items() if json.loads(k)["size"] == "1000"}
    assert len(gone) == 4 and set(gone.values()) == {("retired", "series_gone")}
    _nights(engine, ingest, tmp_path / "back", iter([([d], suite) for d in runs[70:]]))
    nightly = gemm_at_step()
    returned = {k: v for k, v in nightly.items() if json.loads(k)["size"] == "1000"}
    assert len(returned) == 4 and all(st in OPEN_STATUSES for st, _r in returned.values()), returned
    with Session(engine) as s, s.begin():
        detect_store(s, Settings(), full=True)
    assert gemm_at_step() == nightly


def test_reads_of_a_commit_measured_at_two_versions_show_the_last_one(engine: Engine, ingest: Ingest,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    """gemm's code changes at run 70 (a new asv version, 1.5x the time); the backlog measures runs 60-69 again with
    today's suite. Detection counts the version measured last at a commit; History, the summary grid and Compare's
    per-commit results pooled both versions into a value never measured (the median of 1x and 1.5x). And the
    grid's latest change right after the version change compared the new version's first value with the old
    version's: a +50% "regression" where the benchmark changed, detection's new segment."""
    from dashboard import summary
    from db import queries

    runs = _runs()
    suite = json.loads((OPENBLAS / "benchmarks.json").read_text())
    suite2 = copy.deepcopy(suite)
    suite2[GEMM]["version"] = V2
    bumped = copy.deepcopy(runs[70])
    _edit(bumped, GEMM, version=V2, factor=1.5)
    ingest(engine, [_write(tmp_path / "first", [*runs[:70], bumped], suite)])
    with Session(engine) as s:
        ids = [int(c) for c in queries.commits(s, MACHINE)["commit_id"].iloc[-20:]]
        series, values = queries.series(s, MACHINE), queries.recent_values(s, MACHINE, ids)
    table = summary.grid(series, values, ids, pd.DataFrame(), lambda _b, _u: "up_is_worse")
    unversioned = summary.grid(series, values.drop(columns="benchmark_version", errors="ignore"), ids, pd.DataFrame(),
                               lambda _b, _u: "up_is_worse")  # fmt: skip
    gemm = (table["benchmark"] == GEMM).to_numpy()
    assert gemm.sum() == 24 and table.loc[gemm, "change"].isna().all(), table.loc[gemm, "change"].describe()
    assert (unversioned.loc[gemm, "change"] > 1.4).all()  # what it showed: +50% worse
    pd.testing.assert_series_equal(table.loc[~gemm, "change"], unversioned.loc[~gemm, "change"])  # the rest alike

    key, at = str(table.loc[gemm, "params_key"].iloc[0]), runs[65]["commit_hash"]
    with Session(engine) as s:
        hist = queries.history(s, GEMM, key, MACHINE)
    before = hist[hist["sha"] == at].iloc[0]
    ingest(engine, [_write(tmp_path / "backlog", _measured_again(runs[60:70]), suite2)])
    cid = int(before["commit_id"])
    with Session(engine) as s:
        hist = queries.history(s, GEMM, key, MACHINE)
        recent = queries.recent_values(s, MACHINE, [cid])
        at_commit = queries.commit_results(s, cid, MACHINE)
    row = hist[hist["sha"] == at].iloc[0]
    assert row["benchmark_version"] == V2 and row["runs"] == 1
    shown = {
        "history": float(row["value"]),
        "recent_values": float(recent.loc[(recent["benchmark"] == GEMM) & (recent["params_key"] == key),
                                          "value"].iloc[0]),
        "commit_results": float(at_commit.loc[(at_commit["benchmark"] == GEMM) & (at_commit["params_key"] == key),
                                              "value"].iloc[0]),
    }
    assert shown == pytest.approx(dict.fromkeys(shown, 1.5 * float(before["value"])), rel=1e-9), shown
