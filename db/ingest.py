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
nor duplicate anything (the writing and its id caches: ``db.run_writer``). Problems of the store itself raise
``db.engine.StoreError``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import DBAPIError
from tqdm import tqdm

from db import gitmeta, limits
from db.asvformat import (
    BENCHMARKS_JSON,
    MACHINE_JSON,
    AsvFormatError,
    ResultFile,
    parse_benchmarks_json,
    parse_machine_json,
    parse_results,
    prepare_benchmarks,
    read_input,
    scan_inputs,
    show_path,
)
from db.engine import StoreError, ensure_schema, first_line, raise_store_error, store_error
from db.expected import Expected
from db.history_order import renumber
from db.models import Commit, Environment, Machine, Run
from db.run_writer import ParsedFile, RunWriter, SuiteListing
from settings import exits

# SQLite: files per transaction (each in its own savepoint). Commits dominate a per-file transaction's
# cost there, and SQLite writers are serialized anyway. Other databases commit each file on its own, so
# concurrent ingests never hold locks across files (no deadlocks between their batches).
_WRITE_BATCH_FILES = 32


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
    commits: set[str] = field(default_factory=set)  # of the files stored now
    # Those of ``commits`` the repository at hand does not have: placed by date, not git.
    unknown_commits: list[str] = field(default_factory=list)
    repo: Path | None = None  # the git repository the commits were looked up in
    # Of ``commits``, those without a git generation: placed by date (counted where no repository knows any).
    by_date: int = 0
    # Commits of the store without a generation that share their date with another: their order is a guess.
    date_ties: int = 0
    # (machine, commit) of ``commits`` with runs of several asv environments -> their names: one series
    # pools them per commit (db.query_base.pool_runs), so an environment missing at some commits moves it.
    mixed_environments: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # (the machine a results file's params name, the one its machine.json or folder names) -> files, where they
    # differ: stored under the file's own name (asv's site skips such files).
    renamed: dict[tuple[str, str], int] = field(default_factory=dict)
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

    def line(self, store: str | None = None) -> str:
        """``ingested N of M files (...), U unchanged, R refused, E failed, in S s[ into STORE]``, then the
        files not stored by what happened to them (``; refused: a.json; failed: b.json``), so no name reads
        as stored into the store."""
        rate = self.results / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"ingested {self.ingested} of {self.files} file{'s' * (self.files != 1)} ({self.results:,} "
            f"result{'s' * (self.results != 1)}, {rate:,.0f} results/s), "
            f"{self.unchanged} unchanged, {len(self.refused)} refused, {len(self.errors)} failed, "
            f"in {self.seconds:.2f} s" + (f" into {store}" if store else "")
        )
        for word, items in (("refused", self.refused), ("failed", self.errors)):
            if items:
                names = [show_path(Path(p).name) for p, _ in items]
                more = f" and {len(names) - 10} more" if len(names) > 10 else ""
                text += f"; {word}: " + ", ".join(names[:10]) + more
        return text

    def machine_names_note(self) -> str | None:
        """The warning for results files that name their machine otherwise than their folder (None when none)."""
        if not self.renamed:
            return None
        (machine, folder), _ = next(iter(self.renamed.items()))
        n = sum(self.renamed.values())
        their = "their" if n > 1 else "its"
        return (f"{n:,} results file{'s' if n > 1 else ''} name{'' if n > 1 else 's'} {their} machine otherwise than "
                f"{their} machine.json or folder, e.g. {machine!r} in {folder!r}: stored under the files' own name, "
                f"as their params say (asv's site skips such files); --machine {machine!r} reads them")

    def environments_note(self) -> str | None:
        """The warning for commits measured in several environments on one machine (None when there are none)."""
        if not self.mixed_environments:
            return None
        (machine, sha), envs = next(iter(self.mixed_environments.items()))
        more = len(self.mixed_environments) - 1
        names = ", ".join(envs).encode("unicode_escape").decode("ascii")  # from files: no escape sequence printed
        return (
            f"{len(self.mixed_environments)} commit{'s' if more else ''} measured in several asv environments on one "
            f"machine, e.g. {sha[:10]} on {machine!r}: {names}. A series pools them per commit, so a commit missing "
            "one environment moves it (compare compares the environments one row each); give each environment its "
            "own machine name (asv run --machine NAME) to keep them apart"
        )

    def order_note(self) -> str | None:
        """The warning for commits placed by date because no repository at hand knows any of them (None when
        a repository placed them, or it knows some: :meth:`unknown_note` names the others)."""
        if not self.by_date or (self.repo is not None and not self.date_ties):
            return None
        n = f"{self.by_date} commit{'s' if self.by_date != 1 else ''}"
        where = "no git repository here" if self.repo is None else f"none of them is in the repository {self.repo}"
        ties = (
            f"; {self.date_ties} commits of the store share a timestamp with another, so their order is a guess "
            "(detection may miss or misplace a change between them)"
            if self.date_ties
            else ""
        )
        return f"{n} placed in history by commit date ({where}){ties}; pass --repo with the benchmarked project's clone"

    def unknown_note(self) -> str | None:
        """The warning for stored commits the repository lacks (None when there are none)."""
        if not self.unknown_commits:
            return None
        shas = [sha[:10] for sha in self.unknown_commits]
        listed = ", ".join(shas[:10]) + (f" and {len(shas) - 10} more" if len(shas) > 10 else "")
        return (
            f"{len(shas)} commit{'s' if len(shas) != 1 else ''} not in the repository {self.repo}: {listed}; "
            "placed in history by date until it has them (fetch them and run `mlaperf ingest` again, or pass "
            "--repo)"
        )


def _progress_bar(total: int, progress: bool | str) -> tqdm:
    # tqdm's disable=None means "only on a TTY"; "always" forces it (e.g. `--progress` in CI logs).
    disable: bool | None = None if progress is True else (progress is False)
    return tqdm(total=total, unit="file", file=sys.stderr, disable=disable, dynamic_ncols=True, leave=False)


def _unplaced(conn: Connection) -> bool:
    """Whether a stored commit has no place in history yet (``commit.position`` NULL)."""
    return conn.execute(select(Commit.id).where(Commit.position.is_(None)).limit(1)).first() is not None


def _mixed_environments(conn: Connection, shas: set[str]) -> dict[tuple[str, str], list[str]]:
    """(machine, commit) of ``shas`` measured in more than one environment -> the environments' names."""
    if not shas:
        return {}
    rows = conn.execute(
        select(Machine.name, Commit.sha, Environment.name)
        .join(Run, Run.machine_id == Machine.id)
        .join(Commit, Commit.id == Run.commit_id)
        .join(Environment, Environment.id == Run.environment_id)
        .where(Commit.sha.in_(sorted(shas)))
        .distinct()
    ).all()
    envs: dict[tuple[str, str], set[str]] = {}
    for machine, sha, env in rows:
        envs.setdefault((str(machine), str(sha)), set()).add(str(env))
    return {key: sorted(names) for key, names in sorted(envs.items()) if len(names) > 1}


def _without_generation(conn: Connection, shas: set[str]) -> list[str]:
    """Those of ``shas`` stored without a git generation (the repository did not have them), sorted; none where
    no stored commit has one (results of another project, or no repository ever: all in date order alike)."""
    known = conn.execute(select(Commit.id).where(Commit.generation.is_not(None)).limit(1)).first()
    if not shas or known is None:
        return []
    rows = conn.execute(select(Commit.sha).where(Commit.sha.in_(sorted(shas)), Commit.generation.is_(None)))
    return sorted(str(sha) for sha in rows.scalars())


def _by_date(conn: Connection, shas: set[str]) -> int:
    """How many of ``shas`` have no git generation (the history order places them by date)."""
    if not shas:
        return 0
    stmt = select(func.count()).select_from(Commit).where(Commit.sha.in_(sorted(shas)), Commit.generation.is_(None))
    return int(conn.scalar(stmt) or 0)


def _date_ties(conn: Connection) -> int:
    """Commits without a generation that share their date with another such commit: date order cannot tell
    them apart (asv's ``date`` is the commit's, to the second), so the insert id decides."""
    tied = (
        select(func.count().label("n"))
        .where(Commit.generation.is_(None), Commit.date.is_not(None))
        .group_by(Commit.date)
        .having(func.count() > 1)
        .subquery()
    )
    return int(conn.scalar(select(func.coalesce(func.sum(tied.c.n), 0))) or 0)


def _resolve_repo(repo: str | Path | None) -> Path | None:
    if repo is None:
        return gitmeta.find_repo()
    found = gitmeta.find_repo(repo)
    if found is None:
        raise ValueError(f"repo {str(repo)!r} is not a git repository")
    return found


class _Inputs:
    """The metadata files beside results files, read once each; a broken one refuses the files using it."""

    def __init__(self, expect: Expected | None = None) -> None:
        self.expect = expect  # what may be stored (commits, machine); None: anything valid
        self.machine_infos: dict[Path, dict[str, Any] | AsvFormatError] = {}
        self.benchmark_sets: dict[Path, dict[str, Any] | AsvFormatError] = {}
        self.suites: dict[Path | None, SuiteListing] = {}

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

    def read_suites(self, files: list[ResultFile]) -> None:
        """Read every benchmarks.json beside ``files`` now (a bad one is reported with the files using it), so a
        results file without one is named by them whatever the order the files come in."""
        for file in files:
            try:
                self.benchmarks(file)
            except AsvFormatError:
                pass

    def described(self) -> dict[str, dict[str, Any]]:
        """The benchmarks the benchmarks.json files read describe with parameter names (the last read wins)."""
        return {name: meta for entries in self.benchmark_sets.values() if not isinstance(entries, AsvFormatError)
                for name, meta in entries.items() if not isinstance(meta, AsvFormatError) and meta["param_names"]}

    def suite(self, file: ResultFile) -> SuiteListing | None:
        """The names the file's benchmarks.json lists that the store could hold; None without one."""
        listed = self.benchmarks(file)
        if listed is None:
            return None
        path = file.benchmarks_json
        if path not in self.suites:
            ok = (n for n, meta in listed.items() if not isinstance(meta, AsvFormatError))
            self.suites[path] = SuiteListing.of(n for n in ok if len(n) <= limits.BENCHMARK_NAME)
        return self.suites[path]


def _or_raise(value: dict[str, Any] | AsvFormatError) -> dict[str, Any]:
    if isinstance(value, AsvFormatError):
        raise value
    return value


def _parse(data: bytes, file: ResultFile, inputs: _Inputs, known: Callable[[], dict[str, dict[str, Any]]]
           ) -> ParsedFile:  # fmt: skip
    """Parse one results file (checked by the parser against ``db.limits``: nesting, finite numbers, 64-bit
    integers, text the store can hold); its run's info is the file's own ``params`` and python, the
    machine's description the machine.json beside it overlaid with them (the parser merges them). Without a
    benchmarks.json beside it, a benchmark's description known from one (``known()``: the store's, and those of
    this ingest's benchmarks.json files read so far) names its parameters, so its series are the ones the store
    has, not new ones under asv's ``param1``, ``param2``."""
    prepared = inputs.benchmarks(file)
    run = parse_results(data, machine_info=inputs.machine_info(file), machine_dir_name=file.path.parent.name,
                        prepared=known() if prepared is None else prepared)  # fmt: skip
    info = dict(run.own_info)
    if run.python is not None:
        info["python"] = run.python
    return ParsedFile(run, info, inputs.suite(file))


def _prepare(file: ResultFile, writer: RunWriter, inputs: _Inputs, summary: IngestSummary
             ) -> tuple[ParsedFile, str] | None:
    """One results file parsed, with its content hash; None when it is already stored, refused or failed
    (counted in ``summary``)."""
    try:
        data = read_input(file.path)
    except AsvFormatError as exc:
        summary.refused.append((show_path(file.path), str(exc)))
        return None
    digest = hashlib.sha256(data).hexdigest()
    if digest in writer.hashes:
        summary.unchanged += 1
        return None
    try:
        if len(file.source_path) > limits.SOURCE_PATH:
            raise AsvFormatError(f"its path is over the limit of {limits.SOURCE_PATH} characters")
        parsed = _parse(data, file, inputs, lambda: {**writer.known_benchmarks(), **inputs.described()})
        unexpected = inputs.expect and inputs.expect.refusal(parsed.run.commit_hash, parsed.run.machine)
        if unexpected:
            raise AsvFormatError(unexpected)
        folder = (inputs.machine_info(file) or {}).get("machine") or (file.results_dir and file.path.parent.name)
        if isinstance(folder, str) and folder and folder != parsed.run.machine:
            key = (parsed.run.machine, folder)
            summary.renamed[key] = summary.renamed.get(key, 0) + 1
        return parsed, digest
    except AsvFormatError as exc:
        summary.refused.append((show_path(file.path), str(exc)))
    except Exception as exc:  # a bug in mlaperf, not in the file: report it and go on with the others
        reason = (str(exc).splitlines() or [""])[0][:200]
        summary.errors.append((show_path(file.path), f"internal error {type(exc).__name__}: {reason}"))
    return None


def _flush(writer: RunWriter, pending: list[tuple[ResultFile, ParsedFile, str]], summary: IngestSummary,
           engine: Engine, bar: tqdm) -> None:
    """Store the ``pending`` files (emptied), counting each outcome in ``summary``; a failure of the store
    itself raises :class:`StoreError` after them."""
    items = [(parsed, file.source_path, digest) for file, parsed, digest in pending]
    fatal: StoreError | None = None
    for (file, parsed, _), outcome in zip(pending, writer.write_batch(items), strict=True):
        if isinstance(outcome, Exception):
            fatal = fatal or store_error(outcome, engine.url)
            summary.errors.append((show_path(file.path), f"database error: {first_line(outcome)}"))
        elif outcome is None:
            summary.unchanged += 1
        else:
            summary.ingested += 1
            summary.results += outcome
            summary.commits.add(parsed.run.commit_hash)
    bar.update(len(pending))
    bar.set_postfix(results=summary.results, refresh=False)
    pending.clear()
    if fatal is not None:  # the store itself failed (disk full, corrupted, gone): no point going on
        raise StoreError(
            f"{fatal} (stopped after storing {summary.ingested} of {summary.files} files; the same ingest "
            "run again skips what is stored)"
        )


def ingest_paths(
    engine: Engine,
    paths: Iterable[str | Path],
    *,
    progress: bool | str = True,
    repo: str | Path | None = None,
    expect: Expected | None = None,
) -> IngestSummary:
    """Ingest asv results into the store behind ``engine``.

    ``paths``: asv results directories, machine directories and/or results files. ``progress``: True
    shows a progress bar on a terminal, ``"always"`` everywhere, False never. ``repo``: the benchmarked
    git repository, for commit parents/message/author/branch and generation (default: the repository
    containing the current directory, used for those commits it has). ``expect``: the commits and machine a
    file may have (others are refused, as invalid files are).

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
    writer = RunWriter(engine)
    try:
        writer.preload()
    except DBAPIError as exc:
        raise_store_error(exc, engine.url)
    inputs = _Inputs(expect)
    inputs.read_suites(files)
    size = _WRITE_BATCH_FILES if engine.dialect.name == "sqlite" else 1
    pending: list[tuple[ResultFile, ParsedFile, str]] = []
    bar = _progress_bar(len(files), progress)
    try:
        for file in files:
            prepared = _prepare(file, writer, inputs, summary)
            if prepared is None:
                bar.update()
                continue
            pending.append((file, *prepared))
            if len(pending) >= size:
                _flush(writer, pending, summary, engine, bar)
        if pending:
            _flush(writer, pending, summary, engine, bar)
    finally:
        bar.close()
    summary.repo = git_repo
    try:
        if git_repo is not None:
            summary.described = writer.describe_commits(git_repo)
        with engine.begin() as conn:
            # Also commits an ingest stopped before placing (killed between storing and renumbering).
            if summary.ingested or summary.described or _unplaced(conn):
                renumber(conn)
            if summary.commits:
                if git_repo is not None:
                    summary.unknown_commits = _without_generation(conn, summary.commits)
                if not summary.unknown_commits:  # else git placed some, and unknown_note names the others
                    summary.by_date = _by_date(conn, summary.commits)
                    summary.date_ties = _date_ties(conn) if summary.by_date else 0
                summary.mixed_environments = _mixed_environments(conn, summary.commits)
    except DBAPIError as exc:
        raise_store_error(exc, engine.url, "write commit metadata to")
    summary.seconds = time.perf_counter() - start
    return summary
