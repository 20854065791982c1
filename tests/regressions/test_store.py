"""Detection against a real store (SQLite and PostgreSQL) filled by real ingestion of asv result files:
alert states (suspect, new, transient, fixed, retired), alert groups, benchmark-version segments."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.engine import downgrade, make_engine, upgrade
from db.ingest import ingest_paths
from db.models import AlertGroup, Commit, Meta, Regression, Run
from db.synthetic import SyntheticHistory, write_git_history, write_synthetic_results
from regressions.config import Settings
from regressions.results import history_noise
from regressions.segments import _lookback_windows
from regressions.store import (
    OPEN_STATUSES,
    WATERMARK_KEY,
    DetectSummary,
    detect_store,
    regressions_frame,
)

Ingest = Callable[[Engine, list[Path]], None]
SERIES = 12  # one time_ benchmark: impl x concurrency x topk
ROOT = Path(__file__).resolve().parents[2]
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"


def files_of(h: SyntheticHistory, commits: range | list[int]) -> list[Path]:
    out = []
    for c in commits:
        (f,) = (h.root / h.machine).glob(f"{h.shas[c][:8]}-*.json")
        out.append(f)
    return out


def run(engine: Engine, **kw: Any) -> DetectSummary:
    with Session(engine) as s, s.begin():
        return detect_store(s, Settings(), **kw)


def detect(engine: Engine, **kw: object) -> tuple[list[int], list[int], int, bool]:
    r = run(engine, **kw)
    return r.new, r.fixed, r.series_examined, r.incremental


def stored(engine: Engine) -> list[Regression]:
    with Session(engine) as s:
        regs = list(s.execute(select(Regression).order_by(Regression.id)).scalars())
        s.expunge_all()
        return regs


def groups(engine: Engine) -> list[AlertGroup]:
    with Session(engine) as s:
        out = list(s.execute(select(AlertGroup).order_by(AlertGroup.id)).scalars())
        s.expunge_all()
        return out


def statuses(engine: Engine) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in stored(engine):
        out[r.status] = out.get(r.status, 0) + 1
    return out


def sha_of(engine: Engine, commit_id: int | None) -> str | None:
    with Session(engine) as s:
        return None if commit_id is None else s.get(Commit, commit_id).sha  # type: ignore[union-attr]


def edit_results(path: Path, change: Callable[[str, dict[str, Any]], None]) -> None:
    """Edit one asv results file in place: ``change(benchmark, columns)`` for each benchmark, where
    ``columns`` maps asv's result_columns names ('result', 'version', ...) to the stored values."""
    data = json.loads(path.read_text())
    names = data["result_columns"]
    for bench in list(data["results"]):
        cols = dict(zip(names, data["results"][bench], strict=False))
        change(bench, cols)
        if cols.get("_drop"):
            del data["results"][bench]
        else:
            data["results"][bench] = [cols.get(n) for n in names]
    path.write_text(json.dumps(data))


def test_newest_step_suspect_then_confirmed_then_fixed(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=45, series=SERIES, steps={39: 1.2, 42: 1 / 1.2})
    ingest(engine, files_of(h, range(39)))
    new, _, examined, incremental = detect(engine)
    assert new == [] and examined == SERIES and not incremental  # first run: everything

    ingest(engine, files_of(h, range(39, 40)))
    r = run(engine)
    assert r.incremental and r.series_examined == SERIES
    assert len(r.new) == SERIES and r.alerting == []  # reported the same night, as suspects
    regs = stored(engine)
    assert {sha_of(engine, x.commit_id) for x in regs} == {h.shas[39]}
    assert {sha_of(engine, x.parent_commit_id) for x in regs} == {h.shas[38]}
    assert all(x.ratio == pytest.approx(1.2, rel=0.02) and x.status == "suspect" for x in regs)
    assert all(x.direction == "up_is_worse" and x.params.keys() == {"impl", "concurrency", "topk"} for x in regs)
    (group,) = groups(engine)
    assert {x.group_id for x in regs} == {group.id} and group.machine_wide and group.series == SERIES

    # The nightly re-runs: nothing new in the store, nothing re-examined, nothing duplicated.
    assert (r := run(engine)).new == [] and r.series_examined == 0
    assert run(engine, full=True).new == [] and len(stored(engine)) == SERIES

    # The next commit keeps the new level: confirmed, and --fail-on-new would fail now.
    ingest(engine, files_of(h, range(40, 41)))
    r = run(engine)
    assert r.new == [] and sorted(r.confirmed) == sorted(r.alerting) and len(r.alerting) == SERIES
    assert statuses(engine) == {"new": SERIES}

    with Session(engine) as s, s.begin():
        first, second = s.execute(select(Regression).order_by(Regression.id).limit(2)).scalars()
        first.status, second.status = "acknowledged", "ignored"
        ignored_id = second.id

    # The step is reverted two commits later: fixed, kept, ignored ones left alone.
    ingest(engine, files_of(h, range(41, 45)))
    new, fixed, _, _ = detect(engine)
    assert new == [] and len(fixed) == SERIES - 1
    for x in stored(engine):
        if x.id == ignored_id:
            assert x.status == "ignored" and x.fixed_commit_id is None
        else:
            assert x.status == "fixed" and sha_of(engine, x.fixed_commit_id) == h.shas[42]
    with Session(engine) as s:
        mark = s.get(Meta, WATERMARK_KEY)
        assert mark is not None and mark.value["result_id"] > 0
        frame = regressions_frame(s, statuses=["fixed"])
        assert len(frame) == SERIES - 1 and set(frame["fixed_sha"]) == {h.shas[42]}
        assert set(frame["group"]) == {group.id} and frame["machine_wide"].all()
        assert set(frame["parent"]) == {h.shas[38]} and set(frame["group_status"]) == {"fixed"}


def test_machine_wide_one_run_event_at_the_newest_commit(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """A one-run slowdown of every series (clocks, a noisy neighbour): one machine-wide group of
    suspects the same night, all transient after the next run; inside the history, nothing at all."""
    h = write_synthetic_results(tmp_path / "results", commits=42, series=SERIES, steps={30: 1.3, 31: 1 / 1.3})
    ingest(engine, files_of(h, range(31)))
    r = run(engine)
    assert len(r.new) == SERIES and len(r.groups) == 1 and r.alerting == []
    (group,) = groups(engine)
    assert group.machine_wide and sha_of(engine, group.commit_id) == h.shas[30]
    ingest(engine, files_of(h, range(31, 32)))
    r = run(engine)
    assert sorted(r.transient) == sorted(x.id for x in stored(engine)) and r.alerting == []
    assert statuses(engine) == {"transient": SERIES}
    with Session(engine) as s:
        assert regressions_frame(s, statuses=["suspect", "new", "acknowledged"]).empty
    # Later nights and a full re-detection raise nothing more: inside the history it is one outlier.
    ingest(engine, files_of(h, range(32, 42)))
    assert run(engine).new == [] and run(engine, full=True).new == []
    assert statuses(engine) == {"transient": SERIES}


def test_a_step_right_after_a_refuted_event_is_its_own_suspect(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=33, series=SERIES, steps={30: 1.3, 31: 1 / 1.3, 32: 1.12})
    ingest(engine, files_of(h, range(31)))
    run(engine)
    ingest(engine, files_of(h, [31]))
    run(engine)
    ingest(engine, files_of(h, [32]))
    r = run(engine)
    assert len(r.new) == SERIES and len(r.groups) == 1
    fresh = [x for x in stored(engine) if x.id in r.new]
    assert {sha_of(engine, x.commit_id) for x in fresh} == {h.shas[32]} and {x.status for x in fresh} == {"suspect"}
    assert statuses(engine) == {"transient": SERIES, "suspect": SERIES}


def test_a_transient_alert_stays_closed_where_it_closed(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """A 1.3x run, then the series 4% above where it was (between half the threshold and the threshold: neither
    refutes nor confirms): the detector stops seeing the step and closes the alerts at the newest run. Later
    nights moved that commit along to each night's newest while nothing about the alerts changed (found night by
    night on stingray's real results); now they stay closed where they closed."""
    h = write_synthetic_results(tmp_path / "results", commits=36, series=SERIES, steps={30: 1.3, 31: 1 / 1.25})
    ingest(engine, files_of(h, range(31)))
    run(engine)
    seen: dict[int, tuple[str, str | None, str | None]] = {}
    for c in range(31, 36):
        ingest(engine, files_of(h, [c]))
        run(engine)
        for r in stored(engine):
            if r.status == "transient":
                state = (r.status, r.close_reason, sha_of(engine, r.closed_commit_id))
                assert seen.setdefault(r.id, state) == state, (c, r.id)
    closed_at = {state[2] for state in seen.values()}
    assert len(seen) == SERIES and None not in closed_at and h.shas[35] not in closed_at


@pytest.mark.parametrize("rerun", ["confirms", "refutes"])
@pytest.mark.parametrize("stepped", [3, SERIES])
def test_rerun_of_the_newest_commit_decides(engine: Engine, tmp_path: Path, ingest: Ingest, rerun: str,
                                            stepped: int) -> None:  # fmt: skip
    """The nightly measures a suspect's commit again: its runs decide, unless most of the machine's series got
    worse there (a machine-wide event, a hiccup as likely as a change): the same commit minutes later on the
    same machine then confirms nothing, and the alerts wait for the next commit (still suspects, no issue)."""
    h = write_synthetic_results(tmp_path / "results", commits=31, series=SERIES)
    again = write_synthetic_results(tmp_path / "rerun", commits=31, series=SERIES, env_name="existing-py3.12")
    assert again.shas == h.shas

    def slower(_bench: str, cols: dict[str, Any]) -> None:  # the first ``stepped`` series (parameter values)
        cols["result"] = [None if v is None else v * (1.25 if i < stepped else 1.0) for i, v in
                          enumerate(cols["result"])]  # fmt: skip
        cols["samples"] = None

    edit_results(files_of(h, [30])[0], slower)
    if rerun == "confirms":
        edit_results(files_of(again, [30])[0], slower)
    ingest(engine, [h.root])
    assert len(run(engine).new) == stepped and statuses(engine) == {"suspect": stepped}
    ingest(engine, files_of(again, [30]))  # the nightly's re-run of the newest commit
    r = run(engine)
    decided = "suspect" if stepped == SERIES else "new"
    assert statuses(engine) == ({decided: stepped} if rerun == "confirms" else {"transient": stepped})
    assert len(r.alerting) == (stepped if rerun == "confirms" and decided == "new" else 0)


def test_benchmark_version_change_starts_a_segment(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """A step that comes with a new asv version of the benchmark is a change of the benchmark: no
    regression across it. A step inside the new version's segment is flagged at its commit."""
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={15: 1.5, 30: 1.2})

    def bump(_bench: str, cols: dict[str, Any]) -> None:
        cols["version"] = "f" * 64

    for f in files_of(h, range(15, 40)):
        edit_results(f, bump)
    ingest(engine, [h.root])
    assert len(run(engine, full=True).new) == SERIES
    assert {sha_of(engine, x.commit_id) for x in stored(engine)} == {h.shas[30]}
    assert statuses(engine) == {"new": SERIES}


def test_series_gone_from_the_newest_run_are_retired(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """Open flags of a benchmark deleted from the suite (missing from its machine's newest run, a full run: 2 of
    its 3 benchmarks ran, and from the benchmarks.json beside it) are retired; a run without any of them (a
    partial `asv run --bench`) retires nothing."""
    # 66 series: Synth000 (time, 30), Synth001 (track, 30), Synth002 (time, 6)
    h = write_synthetic_results(tmp_path / "results", commits=30, series=61, steps={20: 1 / 1.2})
    track = "bench_synth.Synth001.track_case"  # tokens/s falls 17%: a regression of its 30 series

    def drop(bench: str, cols: dict[str, Any]) -> None:
        cols["_drop"] = bench == track

    ingest(engine, files_of(h, range(28)))
    assert len(run(engine).new) == 30 and statuses(engine) == {"new": 30}
    partial = tmp_path / "partial" / h.machine
    partial.mkdir(parents=True)
    suite = json.loads((h.root / "benchmarks.json").read_text())
    (partial.parent / "benchmarks.json").write_text(json.dumps({k: v for k, v in suite.items() if k != track}))
    shutil.copy(h.root / h.machine / "machine.json", partial / "machine.json")
    (newest,) = files_of(h, [28])
    edit_results(shutil.copy(newest, partial / newest.name) and partial / newest.name, drop)
    ingest(engine, [partial.parent])
    r = run(engine)
    assert len(r.retired) == 30 and statuses(engine) == {"retired": 30}

    # Another store: the newest run holds only another module's results: nothing retired.
    other = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    upgrade(str(other.url))
    ingest(other, files_of(h, range(28)))
    run(other)

    def rename(bench: str, cols: dict[str, Any]) -> None:
        cols["_drop"] = True

    (nxt,) = files_of(h, [29])
    edit_results(nxt, rename)
    ingest(other, [nxt])
    assert run(other).retired == [] and statuses(other) == {"new": 30}
    other.dispose()


def test_close_steps_are_each_reported(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={20: 1.2, 23: 1.25})
    ingest(engine, [h.root])
    r = run(engine, full=True)
    assert len(r.new) == 2 * SERIES and len(r.groups) == 2
    by_commit: dict[str | None, list[Regression]] = {}
    for x in stored(engine):
        by_commit.setdefault(sha_of(engine, x.commit_id), []).append(x)
    assert set(by_commit) == {h.shas[20], h.shas[23]}
    assert all(x.ratio == pytest.approx(1.2, rel=0.02) for x in by_commit[h.shas[20]])
    assert all(x.ratio == pytest.approx(1.25, rel=0.02) for x in by_commit[h.shas[23]])
    assert run(engine, full=True).new == []  # and again: each stays one regression


def test_level_after_a_gap_of_failed_runs(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """One high run, failed runs, then the new level: the net change against the level before the gap
    is reported, at the first run that showed it, with the range back to the last run before."""
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={25: 1.5, 26: 1.15 / 1.5})

    def fail(_bench: str, cols: dict[str, Any]) -> None:
        cols["result"] = [None] * len(cols["result"])

    for f in files_of(h, range(26, 30)):
        edit_results(f, fail)
    ingest(engine, [h.root])
    run(engine, full=True)
    regs = stored(engine)
    assert len(regs) == SERIES and {sha_of(engine, x.commit_id) for x in regs} == {h.shas[25]}
    assert all(x.ratio == pytest.approx(1.15, rel=0.03) and x.status == "new" for x in regs)
    assert {sha_of(engine, x.parent_commit_id) for x in regs} == {h.shas[24]}


def test_return_to_an_earlier_level_is_a_labelled_regression(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={20: 1 / 1.25, 26: 1.25})
    ingest(engine, [h.root])
    run(engine, full=True)
    regs = stored(engine)
    assert {sha_of(engine, x.commit_id) for x in regs} == {h.shas[26]}
    assert all(x.labels == ["returns_to_earlier_level"] and x.status == "new" for x in regs)
    with Session(engine) as s:
        assert regressions_frame(s)["returns_to_earlier_level"].all()


def test_full_detect_finds_a_historic_step_at_its_commit(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={17: 1.1}, seed=3)
    ingest(engine, [tmp_path / "results"])
    new, _, examined, _ = detect(engine, full=True)
    assert examined == SERIES and len(new) == SERIES
    assert {sha_of(engine, r.commit_id) for r in stored(engine)} == {h.shas[17]}
    with Session(engine) as s:
        assert s.execute(select(func.count(Regression.id))).scalar_one() == SERIES


def test_machine_filter_and_unknown_machine(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    write_synthetic_results(tmp_path / "results", commits=20, series=SERIES, steps={10: 1.3}, machine="gpu-a")
    ingest(engine, [tmp_path / "results"])
    new, _, _, _ = detect(engine, machine="gpu-a")
    assert len(new) == SERIES
    from regressions.results import UsageError

    with pytest.raises(UsageError, match="--machine.*'nope'"):
        detect(engine, machine="nope")


def test_tied_dates_detected_in_git_order(engine: Engine, tmp_path: Path) -> None:
    """Commits sharing one asv timestamp (made in one second, or rebased): git order decides where the
    step is and where it is fixed, even when the files arrive newest first (commit ids reversed)."""
    tie = dt.datetime(2025, 6, 1, 12, 0, 0)
    shas = write_git_history(tmp_path / "repo", 20, date=tie)
    h = write_synthetic_results(
        tmp_path / "results", commits=20, series=SERIES, steps={12: 1.2, 16: 1 / 1.2}, shas=shas, dates=[tie] * 20
    )
    newest_first = files_of(h, range(18, -1, -1))
    summary = ingest_paths(engine, newest_first, progress=False, repo=tmp_path / "repo")
    assert summary.ok and summary.described == 19
    r = run(engine, lookback=5)
    # Flagged already fixed: counted once, as flagged (with their status), not again as fixed by this run.
    assert not r.incremental and r.series_examined == SERIES and len(r.new) == SERIES and r.fixed == []
    assert r.flagged_status == {"fixed": SERIES} and r.events() == dict.fromkeys(r.new, "flagged")
    regs = stored(engine)
    assert {sha_of(engine, r.commit_id) for r in regs} == {shas[12]}
    assert {sha_of(engine, r.fixed_commit_id) for r in regs} == {shas[16]}
    # One more commit, same second: the incremental pass reads the 5 newest commits by rank.
    assert ingest_paths(engine, files_of(h, range(19, 20)), progress=False, repo=tmp_path / "repo").ok
    new, fixed, examined, incremental = detect(engine, lookback=5)
    assert incremental and examined == SERIES and (new, fixed) == ([], [])
    assert len(stored(engine)) == SERIES
    with Session(engine) as s:
        m = s.execute(select(Run.machine_id).limit(1)).scalar_one()
        windows = _lookback_windows(s, [m], 5)
        by_id = {c.id: c.sha for c in s.execute(select(Commit)).scalars()}
        assert [by_id[i] for i in windows[m] or []] == shas[:-6:-1]  # the 5 newest, by rank not date
        assert _lookback_windows(s, [m], 20) == {m: None}
        # Noise window of `compare`: up to the newer of two commits, in git order.
        key = json.dumps({"concurrency": "1", "impl": "'simt'", "topk": "128"}, sort_keys=True)
        bench = next(iter(h.benchmarks))
        ids = {sha: i for i, sha in by_id.items()}
        noise = history_noise(s, h.machine, [(bench, key)], upto=[ids[shas[3]], ids[shas[9]]])
        assert noise[(bench, key)][1] == 10


def test_real_history_openblas(tmp_path: Path, ingest: Ingest) -> None:
    """Third-party asv results: a one-run event of gbmv on gha-aws-skylake's next-to-newest run is one group
    of suspects, refuted once the newest run is in; benchmark versions are
    segments (no flag at a version change); the renamed D* benchmarks' open flags are retired."""
    engine = make_engine(f"sqlite:///{tmp_path / 'ob.sqlite'}")
    upgrade(str(engine.url))
    machine = OPENBLAS / "gha-aws-skylake"
    runs = sorted((json.loads(p.read_text())["date"], p) for p in machine.glob("*.json") if p.name != "machine.json")
    event, newest = runs[-2][1], runs[-1][1]
    staged = tmp_path / "staged"
    shutil.copytree(OPENBLAS, staged, ignore=shutil.ignore_patterns(newest.name))
    ingest(engine, [staged])
    run(engine)
    with Session(engine) as s:
        at_event = (
            s.execute(
                select(Regression)
                .join(Commit, Commit.id == Regression.commit_id)
                .where(Commit.sha == json.loads(event.read_text())["commit_hash"], Regression.machine_id == _mid(s))
            )
            .scalars()
            .all()
        )
        assert len(at_event) >= 20 and {r.status for r in at_event} == {"suspect"}
        assert len({r.group_id for r in at_event}) == 1
        ids = [r.id for r in at_event]
    ingest(engine, [newest])
    run(engine)
    with Session(engine) as s:
        after = Counter(r.status for r in s.execute(select(Regression).where(Regression.id.in_(ids))).scalars())
        # Refuted by the newest run; the few whose newest run abstains (between half the threshold and the
        # threshold worse) are closed too: most gbmv series moved for that one run (a benchmark's event).
        assert set(after) == {"transient"}
        frame = regressions_frame(s, statuses=OPEN_STATUSES)
        retired = regressions_frame(s, statuses=["retired"])
    assert retired["benchmark"].str.contains(r"\.D|Nrm2\.time_dnrm2").all() and len(retired) > 0
    # Open: neither a flag at a benchmark version change nor one of a retired benchmark.
    assert not frame["benchmark"].str.contains(r"\.D|Nrm2\.time_dnrm2").any()
    assert set(frame["status"]) <= {"new", "suspect"}
    engine.dispose()


def _mid(s: Session) -> int:
    from db.models import Machine

    return s.execute(select(Machine.id).where(Machine.name == "gha-aws-skylake")).scalar_one()


def test_migration_keeps_old_regressions(tmp_path: Path, ingest: Ingest) -> None:
    """A store detected before alert groups (schema 0003) upgrades in place; its regressions get a
    group on the next full run; downgrading maps the new states onto the old ones."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    h = write_synthetic_results(tmp_path / "results", commits=30, series=SERIES, steps={20: 1.2})
    ingest(engine, [h.root])
    run(engine, full=True)
    with Session(engine) as s, s.begin():
        s.execute(Regression.__table__.update().values(group_id=None, parent_commit_id=None, labels=None))
        s.execute(AlertGroup.__table__.delete())
        s.execute(Regression.__table__.update().where(Regression.id == 1).values(status="transient"))
    downgrade(url, "0003")
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT status FROM regression").scalars().all()
    assert len(rows) == SERIES and set(rows) == {"new", "ignored"}
    upgrade(url)
    with Session(engine) as s, s.begin():  # as an older mlaperf left it: other rules, so a full pass
        mark = s.get(Meta, WATERMARK_KEY)
        assert mark is not None
        mark.value = {**mark.value, "fingerprint": "older-rules"}
    assert run(engine).new == [] and len(groups(engine)) == 1  # rules changed: a full pass groups them
    assert {x.group_id for x in stored(engine)} == {groups(engine)[0].id}
    engine.dispose()


def test_an_event_across_benchmarks_is_one_group(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """Issue 27.5: 60 series of two benchmarks 20% slower at one commit (of 150 measured: not machine-wide)
    are one alert group of kind 'event', whose header range is the group's own."""
    h = write_synthetic_results(tmp_path / "results", commits=30, series=150, seed=6)
    hit = {"bench_synth.Synth000.time_case", "bench_synth.Synth002.time_case"}

    def slower(bench: str, cols: dict[str, Any]) -> None:
        if bench in hit:
            cols["result"] = [None if v is None else v * 1.2 for v in cols["result"]]
            cols["samples"] = None

    for f in files_of(h, range(20, 30)):
        edit_results(f, slower)
    ingest(engine, [h.root])
    r = run(engine, full=True)
    assert len(r.new) == 60 and len(r.groups) == 1
    with Session(engine) as s:
        frame = regressions_frame(s)
    assert set(frame["group_kind"]) == {"event"} and not frame["machine_wide"].any()
    assert set(frame["group_commit"]) == {h.shas[20]} and set(frame["group_parent"]) == {h.shas[19]}
    assert set(frame["group_size"]) == {60}


def test_numbers_follow_the_level_as_it_settles(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """Issue 27.4: a step seen first as 4.95x (one run) that settles at 1.11x: once confirmed, before/after/
    ratio/p are the settled level's, not the first night's."""
    h = write_synthetic_results(tmp_path / "results", commits=36, series=SERIES, steps={30: 4.95, 31: 1.11 / 4.95})
    ingest(engine, files_of(h, range(31)))
    run(engine)
    assert all(x.ratio == pytest.approx(4.95, rel=0.02) for x in stored(engine))
    assert statuses(engine) == {"suspect": SERIES}
    ingest(engine, files_of(h, range(31, 36)))
    r = run(engine)
    regs = stored(engine)
    assert statuses(engine) == {"new": SERIES} and sorted(r.updated) == sorted(x.id for x in regs)
    assert all(x.ratio == pytest.approx(1.11, rel=0.02) and x.after / x.before == pytest.approx(x.ratio) for x in regs)
    assert {sha_of(engine, x.commit_id) for x in regs} == {h.shas[30]}
