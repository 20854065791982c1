"""The store itself bad: corrupted files, databases that are not mlaperf stores, missing permissions,
unreachable servers. One line naming the database and what to do, exit 2, never SQL text, never a
suggestion to ingest into a database that is not an mlaperf store, and nothing written to it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from db.engine import StoreError, check_schema, current_revision, ensure_schema, make_engine, store_error, upgrade
from db.ingest import ingest_paths
from tests.db.conftest import REPO_ROOT, bench_row, results_doc, run_cli, run_unprivileged, write_results
from tests.db.test_readonly import in_mount_namespace

SQL_WORDS = ("SELECT", "INSERT", "CREATE", "FROM ", "[SQL", "sqlalche.me")


def one_clear_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mlaperf: error: "), err
    assert not any(w in lines[0] for w in SQL_WORDS), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for i in range(3):
        write_results(root, results_doc({"s.time_a": bench_row([1.0 + i], [])}, commit=f"{i + 1:08x}" + "0" * 32))
    return root


@pytest.fixture
def store(tmp_path: Path, results: Path) -> Path:
    """A real mlaperf store with a few runs, closed (WAL folded into the file)."""
    path = tmp_path / "store" / "mlaperf.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    assert ingest_paths(engine, [results], progress=False).ingested == 3
    engine.dispose()
    assert not Path(f"{path}-wal").exists()
    return path


def _all_commands(capsys: pytest.CaptureFixture, url: str, results: Path) -> list[str]:
    """`ingest` and `db current` / `db upgrade` on ``url``: each exits 2 with one line; returns them."""
    lines = []
    for argv in (["ingest", "--db", url, str(results)], ["db", "current", "--db", url], ["db", "upgrade", "--db", url]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, (argv, out, err)
        lines.append(one_clear_line(err))
    return lines


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b"garbage!" * 16 + b[128:], "is not a SQLite database (it starts with b'garbage!garbage!')"),
        (lambda b: b[: len(b) // 2], "is corrupted: truncated to"),
        (lambda b: b[:100] + b"\xff" * 3000 + b[3100:], "is corrupted (SQLite: "),
        (lambda b: b[:4096] + b"\x0d" * 4096 + b[8192:], "is corrupted (SQLite: database disk image is malformed)"),
    ],
    ids=["overwritten header", "truncated", "garbled schema page", "garbled table page"],
)
def test_corrupted_store_is_named_in_one_line(
    damage, reason: str, store: Path, results: Path, capsys: pytest.CaptureFixture
) -> None:
    store.write_bytes(damage(store.read_bytes()))
    before = store.read_bytes()
    url = f"sqlite:///{store}"
    for line in _all_commands(capsys, url, results):
        assert f"database file {url} " in line or f"database {url}" in line, line
        assert reason in line, line
        assert "ingest" not in line.split(reason)[-1], line  # never "ingest into it"
    assert store.read_bytes() == before
    # The read-only way in (the dashboard's, compare's) says the same.
    with pytest.raises(StoreError, match="corrupted|not a SQLite database"):
        check_schema(make_engine(url, readonly=True))


def other_application_db(path: Path, *statements: str) -> Path:
    """A SQLite database some other application made."""
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_foreign_sqlite_database_is_left_alone(tmp_path: Path, results: Path, capsys: pytest.CaptureFixture) -> None:
    path = other_application_db(
        tmp_path / "app.sqlite",
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
        "INSERT INTO customers (name) VALUES ('ada')",
    )
    before = path.read_bytes()
    url = f"sqlite:///{path}"
    for line in _all_commands(capsys, url, results):
        assert f"database {url} is not an mlaperf store (it holds tables customers)" in line
        assert "mlaperf ingest" not in line and "db upgrade" not in line
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


def test_other_applications_alembic_revision_is_foreign(tmp_path: Path, results: Path) -> None:
    path = other_application_db(
        tmp_path / "app.sqlite",
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
        "INSERT INTO alembic_version VALUES ('ae1027a6acf')",
    )
    before = path.read_bytes()
    engine = make_engine(f"sqlite:///{path}")
    with pytest.raises(StoreError, match="another application.s schema revision 'ae1027a6acf'"):
        ensure_schema(engine)
    engine.dispose()
    assert path.read_bytes() == before


def test_mlaperf_tables_without_a_revision_are_not_an_empty_store(
    tmp_path: Path, results: Path, capsys: pytest.CaptureFixture
) -> None:
    """Tables made without Alembic: a clear schema error, not a migration failing on "table already exists"."""
    from db.engine import SchemaError
    from db.models import Base

    path = tmp_path / "no-revision.sqlite"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    before = path.read_bytes()
    for line in _all_commands(capsys, url, results):
        assert f"database {url} has mlaperf tables but no schema revision" in line, line
    for check in (current_revision, check_schema, ensure_schema):
        engine = make_engine(url)
        with pytest.raises(SchemaError, match="has mlaperf tables but no schema revision"):
            check(engine)
        engine.dispose()
    assert path.read_bytes() == before


@pytest.mark.postgres
def test_foreign_postgres_schema_is_left_alone(pg_url: str, results: Path, capsys: pytest.CaptureFixture) -> None:
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text("CREATE TABLE invoices (id serial PRIMARY KEY)"))
    for line in _all_commands(capsys, pg_url, results):
        assert "is not an mlaperf store (it holds tables invoices)" in line
        assert "password" not in line.lower()
    assert set(sa.inspect(admin).get_table_names()) == {"invoices"}
    admin.dispose()


def test_unreachable_postgres_is_one_line(results: Path, capsys: pytest.CaptureFixture) -> None:
    url = "postgresql+psycopg://mlaperf:secret@127.0.0.1:1/nowhere"
    code, _, err = run_cli(capsys, "ingest", "--db", url, str(results))
    assert code == 2
    line = one_clear_line(err, "cannot connect to database postgresql+psycopg://mlaperf:***@127.0.0.1:1/nowhere")
    assert "secret" not in line


def test_store_in_a_folder_that_cannot_be_written(store: Path, results: Path) -> None:
    """Ingest names the missing permission; the read-only commands still work (tests/db/test_readonly.py)."""
    extra = results / "test-machine" / "extra.json"
    shutil.copy(next(results.glob("*/0*.json")), extra)
    extra.write_text(extra.read_text().replace("00000001", "eeeeeeee"))
    store.parent.chmod(0o555)
    try:
        proc = run_unprivileged(["-m", "mlaperf.cli", "ingest", "--db", f"sqlite:///{store}", str(results)])
    finally:
        store.parent.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    one_clear_line(proc.stderr, f"cannot write database sqlite:///{store}: write permission on the folder")


def test_read_only_store_file(store: Path, results: Path) -> None:
    store.chmod(0o444)
    try:
        proc = run_unprivileged(["-m", "mlaperf.cli", "ingest", "--db", f"sqlite:///{store}", str(results)])
        current = run_unprivileged(["-m", "mlaperf.cli", "db", "current", "--db", f"sqlite:///{store}"])
    finally:
        store.chmod(0o644)
    assert proc.returncode == 2
    one_clear_line(proc.stderr, "write permission on the file is missing", "can still read it")
    assert current.returncode == 0 and "(up to date)" in current.stdout, current.stderr


def test_store_problems_are_store_errors_for_every_reader(tmp_path: Path) -> None:
    """The contract others code against: StoreError from make_engine / check_schema / current_revision."""
    missing = tmp_path / "none.sqlite"
    with pytest.raises(StoreError, match="does not exist"):
        make_engine(f"sqlite:///{missing}", readonly=True)
    folder = tmp_path / "a-folder.sqlite"
    folder.mkdir()
    with pytest.raises(StoreError, match="is not a file"):
        make_engine(f"sqlite:///{folder}")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    engine = make_engine(f"sqlite:///{empty}", readonly=True)
    assert current_revision(engine) is None  # an empty file is SQLite's empty database, not corruption
    engine.dispose()
    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    upgrade(url)
    engine = make_engine(url, readonly=True)
    check_schema(engine)
    engine.dispose()


# Runs in a mount namespace of its own, with a tmpfs at sys.argv[1]: fills it, ingests, frees room, ingests again,
# and writes what each step printed and what the store held into sys.argv[4] (outside the mount).
_FULL_DISK_DRIVER = """
import json, sqlite3, subprocess, sys
from pathlib import Path
disk, first, more, report = (Path(a) for a in sys.argv[1:5])
store = disk / "mlaperf.sqlite"
def ingest(folder):
    p = subprocess.run([sys.executable, "-m", "mlaperf.cli", "ingest", "--db", f"sqlite:///{store}", str(folder)],
                       capture_output=True, text=True, timeout=300)
    return {"rc": p.returncode, "out": p.stdout, "err": p.stderr}
def held():
    with sqlite3.connect(store) as c:
        return {"check": c.execute("PRAGMA integrity_check").fetchone()[0],
                "runs": c.execute("SELECT count(*) FROM run").fetchone()[0],
                "results": c.execute("SELECT count(*) FROM result").fetchone()[0]}
steps = {"first": ingest(first)}
subprocess.run(f"cat /dev/zero > {disk / 'filler'}", shell=True, stderr=subprocess.DEVNULL)  # cat stops when full
steps["full"] = ingest(more)
(disk / "filler").unlink()
steps["after_full"] = held()
subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
steps["again"] = ingest(more)
steps["after_again"] = held()
report.write_text(json.dumps(steps))
"""


def test_full_disk_stops_ingest_with_one_line_and_keeps_the_store(tmp_path: Path) -> None:
    """A store on a real filesystem with no room left (a 3 MiB tmpfs, filled): ingest exits 2 with one line
    saying the disk is full, the runs stored before are intact, and once there is room the same ingest stores
    everything. SQLite reports this as SQLITE_FULL or, where it maps its -shm file, as a disk I/O error."""
    first, more = tmp_path / "first", tmp_path / "more"
    benches = range(200)
    for i in range(40):
        rows = {f"s.time_{b}": bench_row([1.0 + i + b] * 4, [["1", "2", "3", "4"]]) for b in benches}
        write_results(first if i < 3 else more, results_doc(rows, commit=f"{i + 1:08x}" + "0" * 32, date=i))
    disk, driver, report = tmp_path / "disk", tmp_path / "driver.py", tmp_path / "report.json"
    disk.mkdir()
    driver.write_text(_FULL_DISK_DRIVER)
    script = f"mount -t tmpfs -o size=3m tmpfs {disk} && exec {sys.executable} {driver} {disk} {first} {more} {report}"
    proc = in_mount_namespace(script, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(report.read_text())
    assert steps["first"]["rc"] == 0 and "ingested 3 of 3 files" in steps["first"]["out"], steps["first"]
    store = disk / "mlaperf.sqlite"
    line = one_clear_line(steps["full"]["err"], f"cannot write database sqlite:///{store}: the disk is full (")
    assert steps["full"]["rc"] == 2 and "free in its folder)" in line, steps["full"]
    assert steps["after_full"] == {"check": "ok", "runs": 3, "results": 3 * 4 * len(benches)}
    assert steps["again"]["rc"] == 0 and "ingested 37 of 37 files" in steps["again"]["out"], steps["again"]
    assert steps["after_again"] == {"check": "ok", "runs": 40, "results": 40 * 4 * len(benches)}


def test_an_io_error_with_room_left_is_not_called_a_full_disk(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mlaperf.sqlite'}"  # tmp_path's filesystem has room (the test's own files)
    err = sqlite3.OperationalError("disk I/O error")
    err.sqlite_errorcode = 4874  # SQLITE_IOERR_SHMSIZE
    assert str(store_error(err, url)) == f"cannot use database {url}: disk I/O error (disk I/O error)"
    err.sqlite_errorcode = 13  # SQLITE_FULL: a full disk whatever statvfs says now
    assert str(store_error(err, url)).startswith(f"cannot write database {url}: the disk is full (")
    assert str(store_error(err, "sqlite://")) == "cannot write database sqlite://: the disk is full"
