"""asv results -> the store.

Each results file is one transaction: its run and all its results land together or not at all, so a
broken or truncated file is reported (name and reason) and changes nothing while the others still
ingest. A file whose content hash is already stored is skipped without being parsed, which makes a
re-ingest idempotent and fast. Lookup rows (machine, environment, commit, benchmark) are created with
INSERT .. ON CONFLICT DO NOTHING and then read back, so two ingests racing into one store (SQLite or
PostgreSQL) neither fail nor duplicate anything.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from tqdm import tqdm

from db import gitmeta
from db.asvformat import (
    RESULT_FIELDS,
    AsvFormatError,
    ParsedRun,
    ResultFile,
    benchmark_type,
    default_unit,
    find_result_files,
    parse_benchmarks_json,
    parse_machine_json,
    parse_results,
)
from db.engine import ensure_schema
from db.models import MACHINE_INFO_COLUMNS, Benchmark, Commit, Environment, Machine, Result, Run, utcnow

_RESULT_COLUMNS = ("run_id", "benchmark_id", *RESULT_FIELDS)
_SQLITE_RESULT_INSERT = (
    f"INSERT INTO result ({', '.join(_RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(_RESULT_COLUMNS))})"
)
# SQLite: files per transaction (each in its own savepoint). Commits dominate a per-file transaction's
# cost there, and SQLite writers are serialized anyway. Other databases commit each file on its own, so
# concurrent ingests never hold locks across files (no deadlocks between their batches).
_WRITE_BATCH_FILES = 32
_MACHINE_COLUMNS = MACHINE_INFO_COLUMNS
_INT_MACHINE_COLUMNS = {"gpu_sm_count"}
_FLOAT_MACHINE_COLUMNS = {"gpu_memory_gb"}


@dataclass
class IngestSummary:
    """What one :func:`ingest_paths` call did."""

    files: int = 0
    ingested: int = 0
    unchanged: int = 0
    results: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    described: int = 0  # commits given git metadata
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def line(self) -> str:
        rate = self.results / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"ingested {self.ingested} of {self.files} files ({self.results} results, {rate:,.0f} results/s), "
            f"{self.unchanged} unchanged, {len(self.failed)} failed, in {self.seconds:.2f} s"
        )
        if self.failed:
            text += ": " + ", ".join(Path(p).name for p, _ in self.failed)
        return text


def _machine_columns(info: dict[str, Any]) -> dict[str, Any]:
    """Machine table columns from a machine dict, coercing asv's strings ("132") where typed."""
    cols: dict[str, Any] = {}
    for key in _MACHINE_COLUMNS:
        value = info.get(key)
        if value is None or value == "":
            cols[key] = None
        elif key in _INT_MACHINE_COLUMNS:
            try:
                cols[key] = int(float(value))
            except (TypeError, ValueError):
                cols[key] = None
        elif key in _FLOAT_MACHINE_COLUMNS:
            try:
                cols[key] = float(value)
            except (TypeError, ValueError):
                cols[key] = None
        else:
            cols[key] = str(value)
    return cols


def _insert_ignore(conn: Connection, table: Table, values: dict[str, Any], keys: Sequence[str]) -> None:
    """INSERT that does nothing when a row with the same unique ``keys`` exists (race-safe)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        conn.execute(sqlite_insert(table).values(values).on_conflict_do_nothing(index_elements=list(keys)))
    elif dialect == "postgresql":
        conn.execute(pg_insert(table).values(values).on_conflict_do_nothing(index_elements=list(keys)))
    else:
        try:
            with conn.begin_nested():
                conn.execute(insert(table).values(values))
        except IntegrityError:
            pass


def _get_or_create(conn: Connection, table: Table, key: str, value: Any, values: dict[str, Any]) -> int:
    _insert_ignore(conn, table, {key: value, **values}, [key])
    row_id = conn.execute(select(table.c.id).where(table.c[key] == value)).scalar_one()
    return int(row_id)


class _AlreadyStored(Exception):
    """Another ingest stored this file first: roll back, count it as unchanged."""


class _Store:
    """Id caches over one engine; entries made inside a transaction count only once it commits."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.machines: dict[str, tuple[int, dict[str, Any]]] = {}
        self.environments: dict[str, int] = {}
        self.commits: dict[str, int] = {}
        self.benchmarks: dict[str, int] = {}
        self.hashes: set[str] = set()
        self._pending: list[tuple[dict[str, Any], str, Any]] = []
        self.machine_t: Table = Machine.__table__  # type: ignore[assignment]
        self.env_t: Table = Environment.__table__  # type: ignore[assignment]
        self.commit_t: Table = Commit.__table__  # type: ignore[assignment]
        self.bench_t: Table = Benchmark.__table__  # type: ignore[assignment]
        self.run_t: Table = Run.__table__  # type: ignore[assignment]
        self.result_t: Table = Result.__table__  # type: ignore[assignment]

    def preload(self) -> None:
        with self.engine.connect() as conn:
            self.hashes = set(conn.execute(select(self.run_t.c.content_hash)).scalars())
            for id_, name, info in conn.execute(select(Machine.id, Machine.name, Machine.info)):
                self.machines[name] = (id_, info or {})
            self.environments = dict(
                (name, id_) for id_, name in conn.execute(select(Environment.id, Environment.name))
            )
            self.commits = {sha: id_ for id_, sha in conn.execute(select(Commit.id, Commit.sha))}
            self.benchmarks = dict((name, id_) for id_, name in conn.execute(select(Benchmark.id, Benchmark.name)))

    def _stage(self, cache: dict[str, Any], key: str, value: Any) -> None:
        self._pending.append((cache, key, value))

    def committed(self) -> None:
        for cache, key, value in self._pending:
            cache[key] = value
        self._pending.clear()

    def rolled_back(self) -> None:
        self._pending.clear()

    # -- lookups inside a file's transaction ----------------------------------------------------------

    def machine_id(self, conn: Connection, name: str, info: dict[str, Any]) -> int:
        cached = self.machines.get(name)
        if cached is not None and cached[1] == info:
            return cached[0]
        cols = _machine_columns(info)
        if cached is None:
            row_id = _get_or_create(conn, self.machine_t, "name", name, {**cols, "info": info})
        else:
            row_id = cached[0]
        # Keep the latest description (a new driver, a renamed GPU); fields a file lacks stay as they were.
        stored = conn.execute(select(Machine.info).where(Machine.id == row_id)).scalar_one()
        merged = {**(stored or {}), **info}
        if merged != stored:
            conn.execute(
                update(self.machine_t)
                .where(self.machine_t.c.id == row_id)
                .values(info=merged, **{k: v for k, v in _machine_columns(merged).items() if v is not None})
            )
        self._stage(self.machines, name, (row_id, info))
        return row_id

    def environment_id(self, conn: Connection, run: ParsedRun) -> int:
        cached = self.environments.get(run.env_name)
        if cached is not None:
            return cached
        values = {"python": run.python, "requirements": run.requirements, "env_vars": run.env_vars}
        row_id = _get_or_create(conn, self.env_t, "name", run.env_name, values)
        self._stage(self.environments, run.env_name, row_id)
        return row_id

    def commit_id(self, conn: Connection, run: ParsedRun) -> int:
        cached = self.commits.get(run.commit_hash)
        if cached is not None:
            return cached
        row_id = _get_or_create(conn, self.commit_t, "sha", run.commit_hash, {"date": run.commit_date})
        self._stage(self.commits, run.commit_hash, row_id)
        return row_id

    def describe_commits(self, repo: Path) -> int:
        """Fill parents/message/author/branch and generation from ``repo`` into stored commits lacking them.

        Covers commits first stored without a repository at hand, whose files are then skipped as
        unchanged. Returns how many commits were described (given either).
        """
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Commit.sha, Commit.message, Commit.generation).where(
                    or_(Commit.message.is_(None), Commit.generation.is_(None))
                )
            ).all()
        infos = gitmeta.commit_info(repo, [sha for sha, message, _ in rows if message is None])
        gens = gitmeta.generations(repo, [sha for sha, _, generation in rows if generation is None])
        if not infos and not gens:
            return 0
        with self.engine.begin() as conn:
            for sha in sorted(infos):
                info = infos[sha]
                conn.execute(
                    update(self.commit_t)
                    .where(and_(self.commit_t.c.sha == sha, self.commit_t.c.message.is_(None)))
                    .values(parents=info.parents, branch=info.branch, message=info.message, author=info.author)
                )
            if gens:  # one executemany
                conn.execute(
                    update(self.commit_t)
                    .where(and_(self.commit_t.c.sha == bindparam("b_sha"), self.commit_t.c.generation.is_(None)))
                    .values(generation=bindparam("b_generation")),
                    [{"b_sha": sha, "b_generation": gens[sha]} for sha in sorted(gens)],
                )
        return len(set(infos) | set(gens))

    def benchmark_id(self, conn: Connection, name: str) -> int:
        cached = self.benchmarks.get(name)
        if cached is not None:
            return cached
        values = {"type": benchmark_type(name), "unit": default_unit(name), "param_names": [], "params": []}
        row_id = _get_or_create(conn, self.bench_t, "name", name, values)
        self._stage(self.benchmarks, name, row_id)
        return row_id

    def insert_run(self, conn: Connection, values: dict[str, Any]) -> int | None:
        """The new run's id, or None when another ingest stored the same file first."""
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            ins = sqlite_insert if dialect == "sqlite" else pg_insert
            stmt = (
                ins(self.run_t)
                .values(values)
                .on_conflict_do_nothing(index_elements=["content_hash"])
                .returning(self.run_t.c.id)
            )
            return conn.execute(stmt).scalar_one_or_none()
        try:
            with conn.begin_nested():
                return int(conn.execute(insert(self.run_t).values(values)).inserted_primary_key[0])
        except IntegrityError:
            return None

    # -- whole operations ------------------------------------------------------------------------------

    def sync_benchmarks(self, entries: dict[str, dict[str, Any]]) -> None:
        """Create/update benchmark rows from a benchmarks.json, in name order (no lock-order deadlocks)."""
        with self.engine.begin() as conn:
            stored = {
                row.name: row
                for row in conn.execute(
                    select(Benchmark.id, Benchmark.name, Benchmark.type, Benchmark.unit)
                    .add_columns(Benchmark.param_names, Benchmark.params, Benchmark.version, Benchmark.code)
                    .where(Benchmark.name.in_(list(entries)))
                )
            }
            new_ids: dict[str, int] = {}
            for name in sorted(entries):
                entry = entries[name]
                values = {
                    "type": entry.get("type") or benchmark_type(name),
                    "unit": entry.get("unit") or default_unit(name),
                    "param_names": list(entry.get("param_names") or []),
                    "params": list(entry.get("params") or []),
                    "version": None if entry.get("version") is None else str(entry["version"]),
                    "code": entry.get("code"),
                }
                row = stored.get(name)
                if row is None:
                    new_ids[name] = _get_or_create(conn, self.bench_t, "name", name, values)
                    continue
                new_ids[name] = row.id
                if any(getattr(row, k) != v for k, v in values.items()):
                    conn.execute(update(self.bench_t).where(self.bench_t.c.id == row.id).values(values))
        self.benchmarks.update(new_ids)

    def _write_run(self, conn: Connection, parsed: ParsedRun, source_path: str, content_hash: str) -> int:
        machine_id = self.machine_id(conn, parsed.machine, parsed.machine_info)
        env_id = self.environment_id(conn, parsed)
        commit_id = self.commit_id(conn, parsed)
        # Sorted: concurrent PostgreSQL ingests then take row locks in one order (no deadlock).
        bench_ids = {name: self.benchmark_id(conn, name) for name in sorted({g.benchmark for g in parsed.groups})}
        run_id = self.insert_run(
            conn,
            {
                "machine_id": machine_id,
                "commit_id": commit_id,
                "environment_id": env_id,
                "started_at": parsed.started_at,
                "ended_at": parsed.ended_at,
                "source_path": source_path,
                "content_hash": content_hash,
                "ingested_at": utcnow(),
            },
        )
        if run_id is None:
            raise _AlreadyStored
        return self.insert_results(conn, run_id, parsed, bench_ids)

    def write_batch(self, items: list[tuple[ParsedRun, str, str]]) -> list[int | None | Exception]:
        """Store parsed files, each all-or-nothing (a savepoint), the batch in one transaction.

        Per file the outcome is its number of results, None when the same file is already stored, or
        the database error that rolled it back. A failed commit fails the whole batch.
        """
        outcomes: list[int | None | Exception] = []
        try:
            with self.engine.begin() as conn:
                for parsed, source_path, content_hash in items:
                    mark = len(self._pending)
                    try:
                        with conn.begin_nested():
                            outcomes.append(self._write_run(conn, parsed, source_path, content_hash))
                    except _AlreadyStored:
                        del self._pending[mark:]
                        outcomes.append(None)
                    except SQLAlchemyError as exc:
                        del self._pending[mark:]
                        outcomes.append(exc)
        except SQLAlchemyError as exc:
            self.rolled_back()
            return [exc] * len(items)
        except BaseException:
            self.rolled_back()
            raise
        self.committed()
        for (_, _, content_hash), outcome in zip(items, outcomes, strict=True):
            if not isinstance(outcome, Exception):
                self.hashes.add(content_hash)
        return outcomes

    def insert_results(self, conn: Connection, run_id: int, parsed: ParsedRun, bench_ids: dict[str, int]) -> int:
        """Bulk-insert a run's results (one executemany); returns how many."""
        if conn.dialect.name == "sqlite":
            # Hot path: plain DB-API executemany of tuples with the JSON columns serialized here (the
            # params column gets params_key, which is that JSON already), skipping per-row processing.
            dumps = json.dumps
            rows: list[tuple[Any, ...]] = [
                (
                    run_id,
                    bench_ids[g.benchmark],
                    r[0],
                    r[2],
                    *r[2:11],
                    None if r[11] is None else dumps(r[11]),
                )
                for g in parsed.groups
                for r in g.rows
            ]
            if rows:
                conn.exec_driver_sql(_SQLITE_RESULT_INSERT, rows)
            return len(rows)
        dict_rows = [
            dict(zip(_RESULT_COLUMNS, (run_id, bench_ids[g.benchmark], *r), strict=True))
            for g in parsed.groups
            for r in g.rows
        ]
        if dict_rows:
            conn.execute(insert(self.result_t), dict_rows)
        return len(dict_rows)


def _progress_bar(total: int, progress: bool | str) -> tqdm:
    # tqdm's disable=None means "only on a TTY"; "always" forces it (e.g. `--progress` in CI logs).
    disable: bool | None = None if progress is True else (progress is False)
    return tqdm(total=total, unit="file", file=sys.stderr, disable=disable, dynamic_ncols=True, leave=False)


def _resolve_repo(repo: str | Path | None) -> Path | None:
    if repo is None:
        return gitmeta.find_repo()
    found = gitmeta.find_repo(repo)
    if found is None:
        raise ValueError(f"repo {str(repo)!r} is not a git repository")
    return found


def ingest_paths(
    engine: Engine,
    paths: Iterable[str | Path],
    *,
    progress: bool | str = True,
    repo: str | Path | None = None,
) -> IngestSummary:
    """Ingest asv results into the store behind ``engine``.

    ``paths``: asv results directories, machine directories and/or results files. ``progress``: True
    shows a progress bar on a terminal, ``"always"`` everywhere, False never. ``repo``: the benchmarked
    git repository, for commit parents/message/author/branch and generation (default: the repository containing the
    current directory, used for those commits it has). A missing path raises ``FileNotFoundError``,
    a bad ``repo`` ``ValueError``; a bad file is recorded in ``summary.failed`` and changes nothing.
    """
    start = time.perf_counter()
    files = find_result_files(list(paths))
    git_repo = _resolve_repo(repo)
    ensure_schema(engine)
    summary = IngestSummary(files=len(files))
    store = _Store(engine)
    store.preload()

    machine_infos: dict[Path, dict[str, Any]] = {}
    benchmark_sets: dict[Path, dict[str, dict[str, Any]]] = {}

    def benchmarks_for(file: ResultFile) -> dict[str, dict[str, Any]]:
        bench_json = file.benchmarks_json
        if bench_json is None:
            return {}
        if bench_json not in benchmark_sets:
            try:
                entries = parse_benchmarks_json(bench_json.read_bytes())
                store.sync_benchmarks(entries)
            except (OSError, AsvFormatError, SQLAlchemyError) as exc:
                summary.failed.append((str(bench_json), str(exc)))
                entries = {}
            benchmark_sets[bench_json] = entries
        return benchmark_sets[bench_json]

    def machine_info_for(file: ResultFile) -> dict[str, Any]:
        path = file.machine_json
        if path not in machine_infos:
            info: dict[str, Any] = {}
            if path.is_file():
                try:
                    info = parse_machine_json(path.read_bytes())
                except (OSError, AsvFormatError) as exc:
                    summary.failed.append((str(path), str(exc)))
            machine_infos[path] = info
        return machine_infos[path]

    size = _WRITE_BATCH_FILES if engine.dialect.name == "sqlite" else 1
    pending: list[tuple[ResultFile, ParsedRun, str]] = []
    bar = _progress_bar(len(files), progress)

    def flush() -> None:
        items = [(parsed, file.source_path, digest) for file, parsed, digest in pending]
        for (file, _, _), outcome in zip(pending, store.write_batch(items), strict=True):
            if isinstance(outcome, Exception):
                reason = str(getattr(outcome, "orig", None) or outcome).strip().splitlines()[0]
                summary.failed.append((str(file.path), f"database error: {reason}"))
            elif outcome is None:
                summary.unchanged += 1
            else:
                summary.ingested += 1
                summary.results += outcome
        bar.update(len(pending))
        bar.set_postfix(results=summary.results, refresh=False)
        pending.clear()

    try:
        for file in files:
            try:
                data = file.path.read_bytes()
            except OSError as exc:
                summary.failed.append((str(file.path), f"cannot read: {exc.strerror or exc}"))
                bar.update()
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest in store.hashes:
                summary.unchanged += 1
                bar.update()
                continue
            try:
                parsed = parse_results(
                    data,
                    machine_info=machine_info_for(file),
                    machine_dir_name=file.path.parent.name,
                    benchmarks=benchmarks_for(file),
                )
            except AsvFormatError as exc:
                summary.failed.append((str(file.path), str(exc)))
                bar.update()
                continue
            pending.append((file, parsed, digest))
            if len(pending) >= size:
                flush()
        if pending:
            flush()
    finally:
        bar.close()
    if git_repo is not None:
        summary.described = store.describe_commits(git_repo)
    summary.seconds = time.perf_counter() - start
    return summary
