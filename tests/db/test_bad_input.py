"""Issue 14's table, one test per row: each bad input is refused with its path and a one-line reason
(exit 2, never a traceback) and the good file beside it is stored, on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from db.engine import make_engine
from db.models import Benchmark, Result, Run
from tests.db.conftest import bench_row, results_doc, run_cli, run_unprivileged, store_state, write_results

GOOD_SHA = "1" * 40
BAD_SHA = "b" * 40


def bad_doc(mutate: Callable[[dict[str, Any]], Any]) -> str:
    doc = results_doc({"s.time_bad": bench_row([2.0], [])}, commit=BAD_SHA)
    mutate(doc)
    return json.dumps(doc)


def _row(**columns: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["results"].update({"s.time_bad": bench_row([2.0], [], **columns)})


def _text(old: str, new: str) -> str:
    text = bad_doc(lambda d: None)
    assert old in text
    return text.replace(old, new, 1)


ROWS: list[tuple[str, Callable[[], bytes | str], str]] = [
    # The table.
    ("result 400-digit integer", lambda: _text("[2.0]", "[" + "9" * 400 + "]"), "400 digits is outside the 64-bit"),
    ("result 5001-digit integer", lambda: _text("[2.0]", "[" + "9" * 5001 + "]"), "5,001 digits is outside the 64"),
    (
        "JSON 200,000 deep",
        lambda: _text('"env_vars": {}', '"env_vars": ' + "[" * 200_000 + "]" * 200_000),
        "nested too deeply to read (deeper than Python's JSON parser goes)",
    ),
    ("date 1e20", lambda: bad_doc(lambda d: d.update(date=1e20)), "'date' 1e+20 ms is outside the dates"),
    ("started_at 1e20", lambda: bad_doc(_row(started_at=1e20)), "started_at 1e+20 ms is outside the dates"),
    ("stats_number 2**70", lambda: bad_doc(_row(stats_number=2**70)), "integer 1180591620717411303424 is outside"),
    ("time -1e308", lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[-1e308], []]})), "time benchmark"),
    ("time negative", lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[-1e-6], []]})), "0 .. 86,400 s"),
    (
        "100,010-character name",
        lambda: bad_doc(lambda d: d["results"].update({"s.time_" + "x" * 100_003: [[1.0], []]})),
        "(100,010 characters) is over the limit of 512 characters",
    ),
    # Same limits on both backends, near the table's rows.
    ("stats_number 2**40", lambda: bad_doc(_row(stats_number=2**40)), "outside 0 .. 2,147,483,647"),
    ("time over a day", lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[1e6], []]})), "86,400 s"),
    ("sample negative", lambda: bad_doc(_row(samples=[[1.0, -2.0]])), "samples 0 = -2 s is outside"),
    ("date before 1970", lambda: bad_doc(lambda d: d.update(date=-1)), "outside the dates"),
    ("duration negative", lambda: bad_doc(_row(started_at=1_700_000_000_000, duration=-5)), "duration is -5"),
    ("result Infinity", lambda: _text("[2.0]", "[Infinity]"), "inf, not a finite number"),
    ("result 1e400", lambda: _text("[2.0]", "[1e400]"), "inf, not a finite number"),
    ("machine name 256 chars", lambda: bad_doc(lambda d: d["params"].update(machine="m" * 256)), "limit of 255"),
    ("commit hash 65 chars", lambda: bad_doc(lambda d: d.update(commit_hash="c" * 65)), "limit of 64"),
    (
        "params over 1024 chars",
        lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[1.0], [["'" + "p" * 1100 + "'"]]]})),
        "over the limit of 1024 characters",
    ),
    ("NUL in a name", lambda: _text('"s.time_bad"', '"s.time_\\u0000bad"'), "NUL character"),
    ("lone surrogate", lambda: _text('"s.time_bad"', '"s.time_\\ud800bad"'), "lone surrogate"),
    ("duplicate key", lambda: _text('"version": 2', '"version": 2, "version": 2'), "duplicate key 'version'"),
    (
        "deep requirements",
        lambda: _text('"requirements": {}', '"requirements": {"x": ' + "[" * 40 + "]" * 40 + "}"),
        "deeper",
    ),
    ("env_vars a list", lambda: _text('"env_vars": {}', '"env_vars": []'), "'env_vars' must be an object, got list"),
    ("NaN in env_vars", lambda: _text('"env_vars": {}', '"env_vars": {"X": NaN}'), "not a finite number"),
    (
        "repeated parameter value",
        lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[2.0, 3.0], [["1", "1"]]]})),
        "parameter 1 lists the value 1 twice",
    ),
    ("param value not text", lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[1.0], [[None]]]})), "text"),
    (
        "million combinations",
        lambda: bad_doc(lambda d: d["results"].update({"s.time_bad": [[2.0], [[str(i) for i in range(1000)]] * 2]})),
        "1,000,000 parameter combinations, over the limit of 100,000",
    ),
    # "Good already" in the issue: still refused with a reason.
    ("truncated JSON", lambda: bad_doc(lambda d: None)[:-30], "invalid JSON (truncated?)"),
    ("asv version 1", lambda: bad_doc(lambda d: d.update(version=1)), "unsupported asv results format version 1"),
    ("binary file", lambda: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "not UTF-8 text"),
    ("empty file", lambda: b"", "invalid JSON"),
    ("NaN date", lambda: _text('"date": 1700000000000', '"date": NaN'), "not a timestamp"),
]


def _file_name(row_id: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in row_id) + ".json"


def test_each_bad_file_is_refused_and_the_good_one_store_state(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every row of ROWS in one batch beside one good file (one ingest per backend keeps this fast)."""
    root = tmp_path / "results"
    good = write_results(root, results_doc({"s.time_good": bench_row([1.5], [])}, commit=GOOD_SHA))
    paths = {}
    for row_id, make, _ in ROWS:
        paths[row_id] = path = good.parent / _file_name(row_id)
        bad = make()
        path.write_bytes(bad.encode("utf-8", "surrogatepass") if isinstance(bad, str) else bad)
    code, out, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    by_path = dict(line.removeprefix("REFUSED ").split(": ", 1) for line in lines)
    assert len(lines) == len(by_path) == len(ROWS), err
    for row_id, _, reason in ROWS:
        got = by_path.get(str(paths[row_id]))
        assert got is not None and reason in got, f"{row_id}: expected {reason!r} in {got!r}"
        assert len(got) < 300, f"{row_id}: reason is not one short line: {got!r}"
    assert f"ingested 1 of {len(ROWS) + 1} files" in out and f"{len(ROWS)} refused" in out
    state = store_state(db_url)
    assert state["commits"] == {GOOD_SHA}
    assert state["results"] == {(GOOD_SHA, "s.time_good", 1.5)}
    assert state["benchmarks"] == {"s.time_good"} and state["machines"] == {"test-machine"}


def test_values_at_the_limits_are_stored_on_both(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The limits are inclusive where docs/ingest.md says so, and the same on SQLite and PostgreSQL."""
    name = "s.time_" + "n" * (512 - len("s.time_"))
    doc = results_doc(
        {
            name: bench_row([86_400.0], [], stats_number=[2**31 - 1], stats_repeat=[0], samples=[[0.0, 86_400.0]]),
            "s.track_any": bench_row([-1e308, 5e-324, 1e308], [["'a'", "'b'", "'c'"]]),
            "s.mem_big": bench_row([float(2**63)], []),
            "s.time_emoji_🚀_ünï_עברית": bench_row([1e-9, 2e-9], [["'🚀'", "'\u200f'"]]),
        },
        commit="f" * 64,
        machine="m" * 255,
        date=4_102_444_799_999,  # 2099-12-31 23:59:59.999
    )
    root = tmp_path / "results"
    write_results(root, doc, name="limits.json")
    code, out, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 0, err
    state = store_state(db_url)
    assert state["machines"] == {"m" * 255}
    values = {(b, v) for _, b, v in state["results"]}
    assert (name, 86_400.0) in values and ("s.mem_big", float(2**63)) in values
    assert {v for b, v in values if b == "s.track_any"} == {-1e308, 5e-324, 1e308}
    assert {b for b, _ in values if "🚀" in b} == {"s.time_emoji_🚀_ünï_עברית"}
    engine = make_engine(db_url)
    with engine.connect() as conn:
        row = conn.execute(sa.select(Result.number, Result.samples).where(Result.number.is_not(None))).one()
        assert row == (2**31 - 1, [0.0, 86_400.0])
        emoji = sa.select(Result.params_key).join(Benchmark).where(Benchmark.name.like("%emoji%"))
        params = set(conn.execute(emoji).scalars())
        assert params == {json.dumps({"param1": "'🚀'"}), json.dumps({"param1": "'\u200f'"})}
    engine.dispose()


def test_asv_infinite_confidence_bounds_and_nan_stats_are_kept_as_missing(sqlite_url: str, tmp_path: Path) -> None:
    """asv writes +-Infinity for the interval of a single sample: that is 'no estimate', not bad input."""
    root = tmp_path / "results"
    bounds = {"stats_ci_99_a": [-math.inf, 0.5], "stats_ci_99_b": [math.inf, 2.5], "stats_q_25": [math.nan, 1.9]}
    row = bench_row([1.0, 2.0], [["1", "2"]], **bounds)
    write_results(root, results_doc({"s.time_a": row}))
    from db.ingest import ingest_paths

    engine = make_engine(sqlite_url)
    summary = ingest_paths(engine, [root], progress=False)
    assert summary.exit_status == 0, summary.failed
    with engine.connect() as conn:
        rows = conn.execute(sa.select(Result.ci_99_a, Result.ci_99_b, Result.q_25).order_by(Result.id)).all()
    assert [tuple(r) for r in rows] == [(None, None, None), (0.5, 2.5, 1.9)]
    engine.dispose()


def test_file_system_faults_are_named(tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "results"
    good = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    folder = good.parent
    os.symlink("loop-b.json", folder / "loop-a.json")
    os.symlink("loop-a.json", folder / "loop-b.json")
    os.symlink("nowhere.json", folder / "dangling.json")
    (folder / "a-folder.json").mkdir()
    os.mkfifo(folder / "fifo.json")  # a FIFO must not hang the ingest
    (folder / ".partial.json").write_text("{")  # dotfiles (editors, partial copies) are not results
    missing = tmp_path / "missing"
    code, out, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(root), str(missing))
    assert code == 2
    reasons = dict(line.removeprefix("REFUSED ").split(": ", 1) for line in err.strip().splitlines())
    assert reasons == {
        str(folder / "loop-a.json"): "cannot read: Too many levels of symbolic links (a symlink loop)",
        str(folder / "loop-b.json"): "cannot read: Too many levels of symbolic links (a symlink loop)",
        str(folder / "dangling.json"): "cannot read: No such file or directory",
        str(folder / "a-folder.json"): "not a regular file (a directory)",
        str(folder / "fifo.json"): "not a regular file (a FIFO)",
        str(missing): "no such file or directory",
    }
    assert "ingested 1 of 7 files" in out and "6 refused" in out  # every input counted: 1 stored + 6 refused
    assert store_state(sqlite_url)["commits"] == {"a" * 40}


def test_symlink_loop_given_as_a_path(tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture) -> None:
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    code, _, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(tmp_path / "a"))
    assert code == 2 and err.startswith(f"REFUSED {tmp_path / 'a'}: Too many levels of symbolic links (a symlink loop)")


def test_unreadable_file_and_folder(tmp_path: Path) -> None:
    """Run as a user without read permission (root's override dropped, tests/db/conftest.py)."""
    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    locked = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, commit="c" * 40))
    other = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, commit="d" * 40, machine="m2"))
    locked.chmod(0)
    other.parent.chmod(0o311)  # listing forbidden, machine.json still reachable
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    try:
        proc = run_unprivileged(["-m", "mlaperf.cli", "ingest", "--db", url, str(root)])
    finally:
        other.parent.chmod(0o755)
        locked.chmod(0o644)
    assert proc.returncode == 2, proc.stderr
    assert f"REFUSED {locked}: cannot read: Permission denied" in proc.stderr
    assert f"REFUSED {other.parent}: cannot list directory: Permission denied" in proc.stderr
    assert store_state(url)["commits"] == {"a" * 40}


def test_broken_machine_json_refuses_its_results(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, machine="fine"))
    broken = write_results(root, results_doc({"s.time_a": bench_row([2.0], [])}, commit="c" * 40, machine="broken"))
    (broken.parent / "machine.json").write_text('{"machine": "broken", "cpu": ')
    code, out, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 2
    assert f"REFUSED {broken}: its machine.json is bad: invalid JSON (truncated?)" in err
    state = store_state(db_url)
    assert state["machines"] == {"fine"} and state["commits"] == {"a" * 40}


def test_broken_benchmarks_json_refuses_the_files_using_it(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture
) -> None:
    root = tmp_path / "results"
    path = write_results(root, results_doc({"s.time_a": bench_row([1.0], [["1"]])}))
    (root / "benchmarks.json").write_text(json.dumps({"s.time_a": {"param_names": ["n"], "unit": "u" * 65}}))
    code, _, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 2 and f"REFUSED {path}: benchmarks.json entry s.time_a: 'unit'" in err and "limit of 64" in err
    (root / "benchmarks.json").write_text("{not json")
    code, _, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 2 and f"REFUSED {path}: the benchmarks.json of its results folder is bad: invalid JSON" in err
    assert store_state(db_url)["benchmarks"] == set()  # nothing from a refused file, not even its benchmark names
    (root / "benchmarks.json").write_text(json.dumps({"s.time_a": {"param_names": ["n"], "unit": "seconds"}}))
    assert run_cli(capsys, "ingest", "--db", db_url, str(root))[0] == 0


def test_internal_error_is_exit_3_and_the_others_are_store_state(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from db import ingest

    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    buggy = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, commit="c" * 40))
    real = ingest.parse_results

    def parse(data: bytes, **kw: Any):  # noqa: ANN202 - a bug that only this file triggers
        if b"c" * 40 in data:
            raise KeyError("a bug")
        return real(data, **kw)

    monkeypatch.setattr(ingest, "parse_results", parse)
    code, out, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(root))
    assert code == 3
    assert err.strip() == f"ERROR {buggy}: internal error KeyError: 'a bug'"
    assert "ingested 1 of 2 files" in out and "0 refused, 1 failed" in out
    assert store_state(sqlite_url)["commits"] == {"a" * 40}


def test_file_names_that_are_not_utf8(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture) -> None:
    """A name in another encoding is no reason to refuse a good file, nor to crash while naming a bad one."""
    root = tmp_path / "results"
    good = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    folder = os.fsencode(good.parent)
    os.rename(good, os.fsdecode(folder + b"/caf\xe9.json"))
    with open(folder + b"/na\xefve.json", "wb") as handle:
        handle.write(b"{not json")
    code, out, err = run_cli(capsys, "ingest", "--db", db_url, str(root))
    assert code == 2
    assert err.startswith(f"REFUSED {good.parent}/na\\xefve.json: invalid JSON")
    assert "ingested 1 of 2 files" in out
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(sa.select(Run.source_path)).scalar_one() == "test-machine/caf\\xe9.json"
    engine.dispose()
