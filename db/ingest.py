"""asv results -> the store.

One rule (docs/ingest.md): each results file is stored whole or not at all. A file that is not valid asv
output or holds values outside the store's limits (``db.limits``) is refused with its path and a one-line
reason and changes nothing, while every good file of the same batch is stored; the summary counts both.
A file's run, results, and the lookup rows and metadata it brings (machine, environment, commit,
benchmark descriptions from its benchmarks.json) are written in one transaction (a savepoint in a
SQLite batch), so a file refused by the database, or a process killed mid-write, leaves the store as
it was before that file.

A run keeps its file's own top-level ``params`` (``Run.info``: the machine's GPU identity, driver, CUDA,
torch and triton versions and arch profile as they were for that run), while ``Machine.info`` holds the
newest description (machine.json merged with the file's params, the file's winning).

A run is identified by its file's content hash: a file already stored is skipped without being parsed
(a re-ingest is idempotent and fast), while asv re-running a commit rewrites its file with new content,
which is then a second run of that commit. Lookup rows are created with INSERT .. ON CONFLICT DO
NOTHING and then read back, so two ingests racing into one store (SQLite or PostgreSQL) neither fail
nor duplicate anything. Problems of the store itself raise ``db.engine.StoreError``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from tqdm import tqdm

from db import gitmeta, limits
from db.asvformat import (
    BENCHMARKS_JSON,
    MACHINE_JSON,
    RESULT_FIELDS,
    AsvFormatError,
    ParsedRun,
    ResultFile,
    benchmark_type,
    default_unit,
    machine_columns,
    parse_benchmarks_json,
    parse_machine_json,
    parse_results,
    prepare_benchmarks,
    read_input,
    scan_inputs,
    show_path,
)
from db.engine import StoreError, ensure_schema, first_line, raise_store_error, store_error
from db.models import Benchmark, Commit, Environment, Machine, Result, Run, utcnow
from settings import exits

_RESULT_COLUMNS = ("run_id", "benchmark_id", *RESULT_FIELDS)
_SQLITE_RESULT_INSERT = (
    f"INSERT INTO result ({', '.join(_RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(_RESULT_COLUMNS))})"
)
# SQLite: files per transaction (each in its own savepoint). Commits dominate a per-file transaction's
# cost there, and SQLite writers are serialized anyway. Other databases commit each file on its own, so
# concurrent ingests never hold locks across files (no deadlocks between their batches).
_WRITE_BATCH_FILES = 32
_BENCHMARK_META = ("type", "unit", "param_names", "params", "version", "code")


@dataclass
class IngestSummary:
    """What one :func:`ingest_paths` call did.

    ``refused``: (path, reason) of inputs that are not valid asv output or break the store's limits (bad
    input, exit status 2); ``errors``: (path, reason) of files that failed through a fault of mlaperf or
    of the database, not of the file (exit status 3). Every other file was stored or already stored.
    """

    files: int = 0  # inputs: results files found, plus paths that could not be used (refused)
    ingested: int = 0
    unchanged: int = 0
    results: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    described: int = 0  # commits given git metadata
    seconds: float = 0.0

    @property
    def failed(self) -> list[tuple[str, str]]:
        """Every input not stored, refused or errored, in that order."""
        return self.refused + self.errors

    @property
    def ok(self) -> bool:
        return not self.refused and not self.errors

    @property
    def exit_status(self) -> int:
        """0 every file stored or already stored, 2 some input refused, 3 an internal or database error."""
        return exits.INTERNAL if self.errors else exits.USAGE if self.refused else exits.OK

    def line(self) -> str:
        rate = self.results / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"ingested {self.ingested} of {self.files} files ({self.results:,} results, {rate:,.0f} results/s), "
            f"{self.unchanged} unchanged, {len(self.refused)} refused, {len(self.errors)} failed, "
            f"in {self.seconds:.2f} s"
        )
        if self.failed:
            names = [show_path(Path(p).name) for p, _ in self.failed]
            text += ": " + ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        return text


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


def _fit(text: str | None, limit: int | None) -> str | None:
    """git's text as the store takes it: no NUL characters, cut to the column's length."""
    if text is None:
        return None
    text = text.replace("\x00", "\ufffd")
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "\u2026"


class _AlreadyStored(Exception):
    """Another ingest stored this file first: roll back, count it as unchanged."""


class _Store:
    """Id caches over one engine; entries made inside a transaction count only once it commits."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.machines: dict[str, tuple[int, dict[str, Any]]] = {}
        self.environments: dict[str, int] = {}
        self.commits: dict[str, int] = {}
        self.benchmarks: dict[str, tuple[int, dict[str, Any]]] = {}
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
            columns = [Benchmark.id, Benchmark.name, *(getattr(Benchmark, k) for k in _BENCHMARK_META)]
            self.benchmarks = {
                row[1]: (row[0], dict(zip(_BENCHMARK_META, row[2:], strict=True)))
                for row in conn.execute(select(*columns))
            }

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
        cols = machine_columns(info)
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
                .values(info=merged, **{k: v for k, v in machine_columns(merged).items() if v is not None})
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
                    .values(
                        parents=info.parents,
                        branch=_fit(info.branch, limits.COMMIT_BRANCH),
                        message=_fit(info.message, None),
                        author=_fit(info.author, limits.COMMIT_AUTHOR),
                    )
                )
            if gens:  # one executemany
                conn.execute(
                    update(self.commit_t)
                    .where(and_(self.commit_t.c.sha == bindparam("b_sha"), self.commit_t.c.generation.is_(None)))
                    .values(generation=bindparam("b_generation")),
                    [{"b_sha": sha, "b_generation": gens[sha]} for sha in sorted(gens)],
                )
        return len(set(infos) | set(gens))

    def benchmark_id(self, conn: Connection, name: str, meta: dict[str, Any] | None) -> int:
        """The benchmark's id; ``meta`` (from the file's benchmarks.json) becomes its description."""
        cached = self.benchmarks.get(name)
        if cached is not None and (meta is None or cached[1] == meta):
            return cached[0]
        if cached is None:
            values = meta or {"type": benchmark_type(name), "unit": default_unit(name), "param_names": [], "params": []}
            row_id = _get_or_create(conn, self.bench_t, "name", name, values)
            row = conn.execute(
                select(*(self.bench_t.c[k] for k in _BENCHMARK_META)).where(self.bench_t.c.id == row_id)
            ).one()
            stored = dict(zip(_BENCHMARK_META, row, strict=True))
        else:
            row_id, stored = cached
        if meta is not None and stored != meta:
            # The latest benchmarks.json describes the benchmark (a new version, unit, parameters).
            conn.execute(update(self.bench_t).where(self.bench_t.c.id == row_id).values(meta))
            stored = meta
        self._stage(self.benchmarks, name, (row_id, stored))
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

    def _write_run(self, conn: Connection, item: _Parsed, source_path: str, content_hash: str) -> int:
        parsed = item.run
        machine_id = self.machine_id(conn, parsed.machine, parsed.machine_info)
        env_id = self.environment_id(conn, parsed)
        commit_id = self.commit_id(conn, parsed)
        # Sorted: concurrent PostgreSQL ingests then take row locks in one order (no deadlock).
        metas = {g.benchmark: g.meta for g in parsed.groups}
        bench_ids = {name: self.benchmark_id(conn, name, metas[name]) for name in sorted(metas)}
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
                "info": item.info,
            },
        )
        if run_id is None:
            raise _AlreadyStored
        return self.insert_results(conn, run_id, parsed, bench_ids)

    def write_batch(self, items: list[tuple[_Parsed, str, str]]) -> list[int | None | Exception]:
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


class _Inputs:
    """The metadata files beside results files, read once each; a broken one refuses the files using it."""

    def __init__(self) -> None:
        self.machine_infos: dict[Path, dict[str, Any] | AsvFormatError] = {}
        self.benchmark_sets: dict[Path, dict[str, Any] | AsvFormatError] = {}

    def machine_info(self, file: ResultFile) -> dict[str, Any]:
        path = file.machine_json
        if path not in self.machine_infos:
            try:
                # No machine.json at all is fine (a lone results file names its machine in 'params').
                info = parse_machine_json(read_input(path)) if os.path.lexists(path) else {}
            except AsvFormatError as exc:
                info = AsvFormatError(f"its {MACHINE_JSON} is bad: {exc}")
            self.machine_infos[path] = info
        return _or_raise(self.machine_infos[path])

    def benchmarks(self, file: ResultFile) -> dict[str, Any] | None:
        path = file.benchmarks_json
        if path is None:
            return None
        if path not in self.benchmark_sets:
            try:
                entries: dict[str, Any] | AsvFormatError = prepare_benchmarks(parse_benchmarks_json(read_input(path)))
            except AsvFormatError as exc:
                entries = AsvFormatError(f"the {BENCHMARKS_JSON} of its results folder is bad: {exc}")
            self.benchmark_sets[path] = entries
        return _or_raise(self.benchmark_sets[path])


def _or_raise(value: dict[str, Any] | AsvFormatError) -> dict[str, Any]:
    if isinstance(value, AsvFormatError):
        raise value
    return value


@dataclass
class _Parsed:
    """A parsed results file and its run's own description (``Run.info``)."""

    run: ParsedRun
    info: dict[str, Any]


def _parse(data: bytes, file: ResultFile, inputs: _Inputs) -> _Parsed:
    """Parse one results file (checked by the parser against ``db.limits``: nesting, finite numbers, 64-bit
    integers, text the store can hold); its run's info is the file's own ``params`` and python, the
    machine's description the machine.json beside it overlaid with them (the parser merges them)."""
    run = parse_results(data, machine_info=inputs.machine_info(file), machine_dir_name=file.path.parent.name,
                        prepared=inputs.benchmarks(file))  # fmt: skip
    info = dict(run.own_info)
    if run.python is not None:
        info["python"] = run.python
    return _Parsed(run, info)


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
    git repository, for commit parents/message/author/branch and generation (default: the repository
    containing the current directory, used for those commits it has).

    Bad input never raises: a path that does not exist or cannot be read, and a file that is not valid
    asv output or breaks the store's limits, is recorded in ``summary.refused`` and changes nothing; a
    file that fails through a bug or a database fault is recorded in ``summary.errors``; every other file
    is stored. A bad ``repo`` raises ``ValueError``; a store that cannot be used (corrupted, not an
    mlaperf store, unwritable, unreachable, older schema) raises :class:`db.engine.StoreError`, also
    mid-way, after committing the files stored so far.
    """
    start = time.perf_counter()
    files, problems = scan_inputs(list(paths))
    git_repo = _resolve_repo(repo)
    ensure_schema(engine)
    summary = IngestSummary(files=len(files) + len(problems))  # an unusable path counts: N of M adds up
    summary.refused.extend((show_path(p), reason) for p, reason in problems)
    store = _Store(engine)
    try:
        store.preload()
    except DBAPIError as exc:
        raise_store_error(exc, engine.url)
    inputs = _Inputs()
    size = _WRITE_BATCH_FILES if engine.dialect.name == "sqlite" else 1
    pending: list[tuple[ResultFile, _Parsed, str]] = []
    bar = _progress_bar(len(files), progress)

    def flush() -> None:
        items = [(parsed, file.source_path, digest) for file, parsed, digest in pending]
        fatal: StoreError | None = None
        for (file, _, _), outcome in zip(pending, store.write_batch(items), strict=True):
            if isinstance(outcome, Exception):
                fatal = fatal or store_error(outcome, engine.url)
                summary.errors.append((show_path(file.path), f"database error: {first_line(outcome)}"))
            elif outcome is None:
                summary.unchanged += 1
            else:
                summary.ingested += 1
                summary.results += outcome
        bar.update(len(pending))
        bar.set_postfix(results=summary.results, refresh=False)
        pending.clear()
        if fatal is not None:  # the store itself failed (disk full, corrupted, gone): no point going on
            raise StoreError(
                f"{fatal} (stopped after storing {summary.ingested} of {summary.files} files; the same ingest "
                "run again skips what is stored)"
            )

    try:
        for file in files:
            try:
                data = read_input(file.path)
            except AsvFormatError as exc:
                summary.refused.append((show_path(file.path), str(exc)))
                bar.update()
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest in store.hashes:
                summary.unchanged += 1
                bar.update()
                continue
            try:
                if len(file.source_path) > limits.SOURCE_PATH:
                    raise AsvFormatError(f"its path is over the limit of {limits.SOURCE_PATH} characters")
                parsed = _parse(data, file, inputs)
            except AsvFormatError as exc:
                summary.refused.append((show_path(file.path), str(exc)))
                bar.update()
                continue
            except Exception as exc:  # a bug in mlaperf, not in the file: report it and go on with the others
                reason = (str(exc).splitlines() or [""])[0][:200]
                summary.errors.append((show_path(file.path), f"internal error {type(exc).__name__}: {reason}"))
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
        try:
            summary.described = store.describe_commits(git_repo)
        except DBAPIError as exc:
            raise_store_error(exc, engine.url, "write commit metadata to")
    summary.seconds = time.perf_counter() - start
    return summary
