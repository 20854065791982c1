"""Migrations: upgrade from empty on both backends, models == migrations, old schemas get a clear message."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from db.engine import (
    SchemaError,
    check_schema,
    current_revision,
    downgrade,
    ensure_schema,
    head_revision,
    make_engine,
    upgrade,
)
from db.models import Base


def test_upgrade_from_empty_matches_models(db_url: str) -> None:
    engine = make_engine(db_url)
    assert current_revision(engine) is None
    upgrade(db_url)
    assert current_revision(engine) == head_revision()
    check_schema(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"
    # Idempotent: a second upgrade is a no-op.
    upgrade(db_url)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_older_schema_gets_clear_message(db_url: str) -> None:
    upgrade(db_url, "0001")
    engine = make_engine(db_url)
    with pytest.raises(SchemaError) as info:
        check_schema(engine)
    message = str(info.value)
    assert "is at schema revision 0001, this mlaperf needs" in message
    assert "run `mlaperf db upgrade --db" in message
    # ensure_schema (used by ingest) does not migrate silently either.
    with pytest.raises(SchemaError, match="0001"):
        ensure_schema(engine)
    upgrade(db_url)
    check_schema(engine)
    engine.dispose()


def test_empty_database_message_and_unknown_revision(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    with pytest.raises(SchemaError, match="is empty"):
        check_schema(engine)
    upgrade(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaError, match="newer mlaperf"):
        check_schema(engine)
    engine.dispose()


def test_downgrade_keeps_older_tables(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO machine (name, info) VALUES ('kept', '{}')"))
    downgrade(sqlite_url, "0001")
    assert current_revision(engine) == "0001"
    tables = set(sa.inspect(engine).get_table_names())
    assert "regression" not in tables and "machine" in tables
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM machine")).scalar() == "kept"
    downgrade(sqlite_url, "base")
    assert current_revision(engine) is None
    engine.dispose()


def test_unknown_target_revision_is_schema_error(sqlite_url: str) -> None:
    with pytest.raises(SchemaError, match="cannot upgrade"):
        upgrade(sqlite_url, "nope")


def test_one_head() -> None:
    from pathlib import Path

    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(Path(__file__).resolve().parents[2] / "db" / "migrations"))
    assert script.get_heads() == [head_revision()] == ["0012"]


def test_run_info_up_and_down_keeps_every_result(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """0005 adds run.info: a store at 0004 with runs upgrades with NULL there; a downgrade drops only the
    column (SQLite must not copy "run": dropping the original would cascade to every result)."""
    import json

    from db.ingest import ingest_paths
    from tests.db.conftest import bench_row, results_doc, write_results

    def ingest(commit: str, torch: str) -> None:
        doc = results_doc({"b.S.time_x": bench_row([1e-4, 2e-4], [["1", "2"]])}, commit=commit * 40,
                          params={"torch": torch})  # fmt: skip
        summary = ingest_paths(make_engine(db_url), [write_results(tmp_path / commit, doc)], progress=False)
        assert summary.ok and summary.ingested == 1, summary.line()

    def rows() -> tuple[int, list[object]]:
        with engine.connect() as conn:
            results = conn.execute(sa.text("SELECT count(*) FROM result")).scalar_one()
            cols = {c["name"] for c in sa.inspect(conn).get_columns("run")}
            infos = conn.execute(sa.text("SELECT info FROM run ORDER BY id")).scalars().all() if "info" in cols else []
        return results, [json.loads(i) if isinstance(i, str) else i for i in infos]

    upgrade(db_url)
    engine = make_engine(db_url)
    ingest("a", "2.10.0")
    downgrade(db_url, "0004")
    assert current_revision(engine) == "0004"
    assert rows() == (2, []), "the column is gone, every result is kept"
    upgrade(db_url)
    assert rows() == (2, [None]), "a run stored before 0005 has no info"
    ingest("b", "2.11.0")
    results, infos = rows()
    assert results == 4 and infos[0] is None and infos[1]["torch"] == "2.11.0"
    engine.dispose()


def test_interpreter_path_as_python_up_and_down_keeps_every_run(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """0006 widens environment.python: asv writes the interpreter's path there for an ``existing``
    environment (how mlaperf runs asv), longer than 32 characters on most runners. Stored runs survive
    the change both ways (SQLite must not copy "environment": run.environment_id cascades)."""
    from db.ingest import ingest_paths
    from tests.db.conftest import bench_row, results_doc, write_results

    path = "/home/runner/actions-runner/_work/mlaperf/mlaperf/.venv/bin/python"  # 66 characters

    def ingest(commit: str, python: str, env: str) -> None:
        doc = results_doc({"b.S.time_x": bench_row([1e-4, 2e-4], [["1", "2"]])}, commit=commit * 40, env_name=env)
        doc["python"] = doc["params"]["python"] = python
        summary = ingest_paths(make_engine(db_url), [write_results(tmp_path / commit, doc)], progress=False)
        assert summary.ok and summary.ingested == 1, summary.line()

    def rows() -> tuple[int, int, list[str]]:
        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT count(*) FROM run")).scalar_one()
            results = conn.execute(sa.text("SELECT count(*) FROM result")).scalar_one()
            pythons = conn.execute(sa.text("SELECT python FROM environment ORDER BY id")).scalars().all()
        return runs, results, pythons

    upgrade(db_url)
    engine = make_engine(db_url)
    ingest("a", "3.11", "existing-py3.11")
    ingest("b", path, "existing-py_home_runner_venv")
    assert rows() == (2, 4, ["3.11", path])
    downgrade(db_url, "0005")
    assert rows() == (2, 4, ["3.11", path[:32]]), "every run kept; the path cut to the old width"
    upgrade(db_url)
    assert current_revision(engine) == head_revision()
    assert rows() == (2, 4, ["3.11", path[:32]]), "every run kept by the upgrade"
    ingest("c", path + "3", "existing-py_home_runner_venv3")
    assert rows() == (3, 6, ["3.11", path[:32], path + "3"])
    engine.dispose()


def test_regression_now_ratio_up_and_down_keeps_every_alert(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """0010 adds regression.now_ratio (nullable): a downgrade to 0009 drops only the column (SQLite copies
    "regression" in batch mode: every alert and its other columns kept); upgrading again gives NULL there."""
    import json

    from db.ingest import ingest_paths
    from tests.db.conftest import bench_row, results_doc, write_results

    upgrade(db_url)
    engine = make_engine(db_url)
    doc = results_doc({"b.S.time_x": bench_row([1e-4, 2e-4], [["1", "2"]])})
    assert ingest_paths(engine, [write_results(tmp_path, doc)], progress=False).ok
    columns = "benchmark_id, params_key, params, machine_id, commit_id, before, after, ratio, direction, status, " \
              "detected_at, labels"  # fmt: skip
    with engine.begin() as conn:
        conn.execute(sa.text(
            f"INSERT INTO regression ({columns}, now_ratio) SELECT b.id, '{{}}', '{{}}', m.id, c.id, 1.0, 2.0, 2.0, "
            "'up_is_worse', 'new', CURRENT_TIMESTAMP, '[\"partly_recovered\"]', 1.3 FROM benchmark b, machine m, "
            '"commit" c'))  # fmt: skip

    def rows() -> tuple[set[str], list[tuple[object, ...]]]:
        with engine.connect() as conn:
            names = {c["name"] for c in sa.inspect(conn).get_columns("regression")}
            kept = conn.execute(sa.text(f"SELECT ratio, status, labels{', now_ratio' * ('now_ratio' in names)} "
                                        "FROM regression")).all()  # fmt: skip
        # PostgreSQL gives the JSON column decoded, SQLite as its text.
        return names, [(r[0], r[1], json.loads(r[2]) if isinstance(r[2], str) else r[2], *r[3:]) for r in kept]

    names, kept = rows()
    assert "now_ratio" in names and kept == [(2.0, "new", ["partly_recovered"], 1.3)]
    nullable = {c["name"]: c["nullable"] for c in sa.inspect(engine).get_columns("regression")}
    assert nullable["now_ratio"] is True
    downgrade(db_url, "0009")
    assert current_revision(engine) == "0009"
    names, kept = rows()
    assert "now_ratio" not in names and kept == [(2.0, "new", ["partly_recovered"])]
    upgrade(db_url)
    assert current_revision(engine) == head_revision()
    assert rows()[1] == [(2.0, "new", ["partly_recovered"], None)], "a row from before 0010 has no now_ratio"
    check_schema(engine)
    engine.dispose()


def test_run_suite_up_and_down_keeps_every_run(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """0011 adds table suite and run.suite_id (nullable): a downgrade to 0010 drops both and keeps every run and
    result (SQLite must not copy "run": dropping the original would cascade to every result); upgrading again
    gives NULL for the runs stored before, and the next ingest with a benchmarks.json fills its own run."""
    import json

    from db.ingest import ingest_paths
    from tests.db.conftest import bench_row, results_doc, write_results

    def ingest(commit: str) -> None:
        folder = tmp_path / commit
        folder.mkdir()
        entry = {"name": "b.S.time_x", "type": "time", "unit": "seconds", "param_names": ["n"], "params": [["1", "2"]]}
        (folder / "benchmarks.json").write_text(json.dumps({"b.S.time_x": entry, "b.S.time_y": entry, "version": 2}))
        write_results(folder, results_doc({"b.S.time_x": bench_row([1e-4, 2e-4], [["1", "2"]])}, commit=commit * 40))
        assert ingest_paths(make_engine(db_url), [folder], progress=False).ingested == 1

    def rows() -> tuple[int, list[object]]:
        with engine.connect() as conn:
            results = conn.execute(sa.text("SELECT count(*) FROM result")).scalar_one()
            cols = {c["name"] for c in sa.inspect(conn).get_columns("run")}
            query = sa.text("SELECT suite_id FROM run ORDER BY id")
            ids = conn.execute(query).scalars().all() if "suite_id" in cols else []
        return results, [i is not None for i in ids]

    upgrade(db_url)
    engine = make_engine(db_url)
    ingest("a")
    assert rows() == (2, [True])
    downgrade(db_url, "0010")
    assert current_revision(engine) == "0010"
    assert rows() == (2, []) and "suite" not in sa.inspect(engine).get_table_names(), "every result is kept"
    upgrade(db_url)
    assert rows() == (2, [False]), "a run stored before 0011 has no suite"
    ingest("b")
    assert rows() == (4, [False, True])
    check_schema(engine)
    engine.dispose()


def test_result_started_up_and_down_keeps_every_result(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """0012 adds result.started_ms (nullable, in place): a downgrade to 0011 drops it and keeps every result; upgrading
    again gives NULL for the results stored before, and the next ingest stores asv's started_at."""
    from db.ingest import ingest_paths
    from tests.db.conftest import bench_row, results_doc, write_results

    def ingest(commit: str) -> None:
        folder = tmp_path / commit
        folder.mkdir()
        row = bench_row([1e-4, 2e-4], [["1", "2"]], version="v1", started_at=1_700_000_000_000, duration=1.0)
        write_results(folder, results_doc({"b.S.time_x": row}, commit=commit * 40))
        assert ingest_paths(make_engine(db_url), [folder], progress=False).ingested == 1

    def rows() -> list[bool]:
        with engine.connect() as conn:
            if "started_ms" not in {c["name"] for c in sa.inspect(conn).get_columns("result")}:
                return [False] * conn.execute(sa.text("SELECT count(*) FROM result")).scalar_one()
            query = sa.text("SELECT started_ms FROM result ORDER BY id")
            return [v is not None for v in conn.execute(query).scalars()]

    upgrade(db_url)
    engine = make_engine(db_url)
    ingest("a")
    assert rows() == [True, True]
    downgrade(db_url, "0011")
    assert current_revision(engine) == "0011" and len(rows()) == 2, "every result is kept"
    upgrade(db_url)
    assert rows() == [False, False], "a result stored before 0012 has no started_ms"
    ingest("b")
    assert rows() == [False, False, True, True]
    check_schema(engine)
    engine.dispose()
