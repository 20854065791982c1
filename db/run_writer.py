"""Writing parsed asv runs into the store for ``db.ingest``: each file's machine, environment, commit,
benchmarks, run and results in one transaction (a savepoint in a SQLite batch), with the ids of the lookup
rows cached across files (an entry made inside a transaction counts only once it commits). Lookup rows are
created with INSERT .. ON CONFLICT DO NOTHING and read back, so racing ingests neither fail nor duplicate."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from db import gitmeta, limits
from db.asvformat import RESULT_FIELDS, ParsedRun, ResultGroup, benchmark_type, default_unit, machine_columns
from db.models import Benchmark, Commit, Environment, Machine, Result, Run, Suite, utcnow

_RESULT_COLUMNS = ("run_id", "benchmark_id", *RESULT_FIELDS, "started_ms")
_SQLITE_RESULT_INSERT = (
    f"INSERT INTO result ({', '.join(_RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(_RESULT_COLUMNS))})"
)
_BENCHMARK_META = ("type", "unit", "param_names", "params", "version", "code")


@dataclass(frozen=True)
class SuiteListing:
    """The benchmark names of one benchmarks.json (sorted) and their content hash (``Suite.content_hash``)."""

    names: tuple[str, ...]
    digest: str

    @classmethod
    def of(cls, names: Iterable[str]) -> SuiteListing:
        ordered = tuple(sorted(names))
        return cls(ordered, hashlib.sha256(json.dumps(ordered).encode()).hexdigest())


@dataclass
class ParsedFile:
    """A parsed results file and its run's own description (``Run.info``)."""

    run: ParsedRun
    info: dict[str, Any]
    suite: SuiteListing | None = None  # what the benchmarks.json beside it lists, if there is one


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


class RunWriter:
    """Writes parsed files into the store behind one engine, caching the ids of its lookup rows (machines,
    environments, commits, benchmarks) and the content hashes of the runs stored; entries made inside a
    transaction count only once it commits."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.machines: dict[str, tuple[int, dict[str, Any]]] = {}
        self.environments: dict[str, int] = {}
        self.commits: dict[str, int] = {}
        self.benchmarks: dict[str, tuple[int, dict[str, Any]]] = {}
        self.suites: dict[str, int] = {}  # suite content hash -> id
        self.hashes: set[str] = set()
        self._pending: list[tuple[dict[str, Any], str, Any]] = []
        self.machine_t: Table = Machine.__table__  # type: ignore[assignment]
        self.env_t: Table = Environment.__table__  # type: ignore[assignment]
        self.commit_t: Table = Commit.__table__  # type: ignore[assignment]
        self.bench_t: Table = Benchmark.__table__  # type: ignore[assignment]
        self.run_t: Table = Run.__table__  # type: ignore[assignment]
        self.suite_t: Table = Suite.__table__  # type: ignore[assignment]
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

    def known_benchmarks(self) -> dict[str, dict[str, Any]]:
        """The stored description of every benchmark a benchmarks.json described (parameter names among it)."""
        return {name: meta for name, (_id, meta) in self.benchmarks.items() if meta.get("param_names")}

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

    def suite_id(self, conn: Connection, suite: SuiteListing | None) -> int | None:
        """The id of the suite row of ``suite``, created on first sight; None without a listing."""
        if suite is None:
            return None
        cached = self.suites.get(suite.digest)
        if cached is not None:
            return cached
        # Looked up by its hash first: the names (a long JSON list) are sent only once per suite.
        found = conn.execute(select(self.suite_t.c.id).where(self.suite_t.c.content_hash == suite.digest))
        row_id = found.scalar_one_or_none()
        if row_id is None:
            row_id = _get_or_create(conn, self.suite_t, "content_hash", suite.digest, {"names": list(suite.names)})
        self._stage(self.suites, suite.digest, int(row_id))
        return int(row_id)

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

    def _write_run(self, conn: Connection, item: ParsedFile, source_path: str, content_hash: str) -> int:
        parsed = item.run
        machine_id = self.machine_id(conn, parsed.machine, parsed.machine_info)
        env_id = self.environment_id(conn, parsed)
        commit_id = self.commit_id(conn, parsed)
        # Sorted: concurrent PostgreSQL ingests then take row locks in one order (no deadlock).
        metas = {g.benchmark: g.meta for g in parsed.groups}
        bench_ids = {name: self.benchmark_id(conn, name, metas[name]) for name in sorted(metas)}
        carried = self.carried_over(conn, (machine_id, commit_id, env_id), parsed.groups, bench_ids)
        groups = [g for g in parsed.groups if g.benchmark not in carried]
        if carried and not groups:
            raise _AlreadyStored  # every row is one the store holds: asv measured nothing again
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
                "suite_id": self.suite_id(conn, item.suite),
            },
        )
        if run_id is None:
            raise _AlreadyStored
        return self.insert_results(conn, run_id, groups, bench_ids)

    def write_batch(self, items: list[tuple[ParsedFile, str, str]]) -> list[int | None | Exception]:
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

    def carried_over(self, conn: Connection, where: tuple[int, int, int], groups: list[ResultGroup],
                     bench_ids: dict[str, int]) -> set[str]:  # fmt: skip
        """The benchmarks of ``groups`` whose asv ``started_at`` is that of a result already stored for this
        (machine, commit, environment) ``where``: rows asv copied unchanged into its rewritten results file (``asv
        run --bench`` of part of the suite where the file existed), not measured again, so not a second run."""
        stamped = {(bench_ids[g.benchmark], g.started_ms) for g in groups if g.started_ms is not None}
        if not stamped:
            return set()
        result, run = self.result_t, self.run_t
        machine_id, commit_id, env_id = where
        stored = conn.execute(
            select(result.c.benchmark_id, result.c.started_ms)
            .select_from(result.join(run, run.c.id == result.c.run_id))
            .where(run.c.machine_id == machine_id, run.c.commit_id == commit_id, run.c.environment_id == env_id,
                   result.c.started_ms.is_not(None))
            .distinct()
        )
        seen = {(int(b), int(t)) for b, t in stored}
        return {g.benchmark for g in groups if (bench_ids[g.benchmark], g.started_ms) in seen}

    def insert_results(self, conn: Connection, run_id: int, groups: list[ResultGroup],
                       bench_ids: dict[str, int]) -> int:  # fmt: skip
        """Bulk-insert the results of ``groups`` into run ``run_id`` (one executemany); returns how many."""
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
                    g.started_ms,
                )
                for g in groups
                for r in g.rows
            ]
            if rows:
                conn.exec_driver_sql(_SQLITE_RESULT_INSERT, rows)
            return len(rows)
        dict_rows = [
            dict(zip(_RESULT_COLUMNS, (run_id, bench_ids[g.benchmark], *r, g.started_ms), strict=True))
            for g in groups
            for r in g.rows
        ]
        if dict_rows:
            conn.execute(insert(self.result_t), dict_rows)
        return len(dict_rows)
