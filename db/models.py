"""SQLAlchemy 2.0 typed models of the mlaperf store.

One row per asv results file is a ``Run``; one row per benchmark x parameter combination of a run is a
``Result``. A series is (benchmark name, ``params_key``, machine name), where ``params_key`` is
``json.dumps(params, sort_keys=True)`` of the params dict (values as asv's repr strings).

Times are stored as naive UTC ``datetime`` values so SQLite and PostgreSQL give the same DataFrames.
Schema changes go through ``db/migrations`` (Alembic); keep the two in step
(``tests/db/test_migrations.py`` compares them).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ColumnElement,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from settings.gpu import GPU_KEYS

# Stable constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RESULT_STATUSES = ("ok", "failed", "skipped")
# suspect: seen only in the newest run(s); new: confirmed; transient: refuted by the next run;
# retired: the series no longer runs (docs/detection.md has the transitions).
REGRESSION_STATUSES = ("suspect", "new", "acknowledged", "fixed", "ignored", "transient", "retired")
REGRESSION_DIRECTIONS = ("up_is_worse", "down_is_worse")


def params_key(params: dict[str, Any]) -> str:
    """Canonical series key of a params dict (the contract: sorted-key JSON)."""
    return json.dumps(params, sort_keys=True)


def utcnow() -> dt.datetime:
    """Current time as naive UTC (the convention of every DateTime column here)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        dt.datetime: DateTime(),
    }


# The GPU identity keys the runner adds to asv's machine entry (docs/CONTRACTS.md), one column each;
# defined once in settings.gpu, which records them.
GPU_COLUMNS: tuple[str, ...] = GPU_KEYS
# Machine description columns filled from asv's machine.json / result params (GPU identity included).
MACHINE_INFO_COLUMNS: tuple[str, ...] = ("os", "arch", "cpu", "num_cpu", "ram", *GPU_COLUMNS)


class Machine(Base):
    """A benchmark machine as asv names it, with the GPU identity the runner records."""

    __tablename__ = "machine"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    os: Mapped[str | None] = mapped_column(String(255))
    arch: Mapped[str | None] = mapped_column(String(64))
    cpu: Mapped[str | None] = mapped_column(String(255))
    num_cpu: Mapped[str | None] = mapped_column(String(32))
    ram: Mapped[str | None] = mapped_column(String(64))
    gpu_name: Mapped[str | None] = mapped_column(String(255))
    gpu_cc: Mapped[str | None] = mapped_column(String(16))
    gpu_sm_count: Mapped[int | None] = mapped_column(Integer)
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    gpu_driver: Mapped[str | None] = mapped_column(String(64))
    cuda: Mapped[str | None] = mapped_column(String(64))
    torch: Mapped[str | None] = mapped_column(String(64))
    triton: Mapped[str | None] = mapped_column(String(64))
    # The whole machine dict (machine.json merged with the result file's params).
    info: Mapped[dict[str, Any]] = mapped_column(default=dict)

    runs: Mapped[list[Run]] = relationship(back_populates="machine")


class Environment(Base):
    """An asv environment (``env_name`` such as ``virtualenv-py3.12`` or ``existing-py...``)."""

    __tablename__ = "environment"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    python: Mapped[str | None] = mapped_column(String(1024))  # a version, or an interpreter path (existing env)
    requirements: Mapped[dict[str, Any]] = mapped_column(default=dict)
    env_vars: Mapped[dict[str, Any]] = mapped_column(default=dict)


class Commit(Base):
    """A commit of the benchmarked repository; asv gives sha and date, git the rest when at hand.

    History order is :func:`commit_order`: ``position``, from git generation where known, else by date.
    """

    __tablename__ = "commit"

    id: Mapped[int] = mapped_column(primary_key=True)
    sha: Mapped[str] = mapped_column(String(64), unique=True)
    date: Mapped[dt.datetime | None] = mapped_column(index=True)
    # Number of ancestors including itself (`git rev-list --count`), when the repository was at hand.
    # asv dates have second resolution, so commits made or rebased together tie; this orders them.
    generation: Mapped[int | None] = mapped_column(Integer, index=True)
    # Place in history, 0 = oldest (db.history_order: generation where git knew the commit, else by date);
    # written by ingest after every change, NULL only for a commit stored by a writer still at work.
    position: Mapped[int | None] = mapped_column(Integer, index=True)
    parents: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True))
    branch: Mapped[str | None] = mapped_column(String(255))
    message: Mapped[str | None] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(String(255))


def commit_order(*, descending: bool = False) -> list[ColumnElement[Any]]:
    """ORDER BY terms putting commits in history order, oldest first (newest first if ``descending``).

    ``position`` (:mod:`db.history_order`), then (coalesce(generation, -1), date, id) for commits another
    ingest stored but has not placed yet: those come after the placed ones, as new commits mostly are. Same on
    SQLite and PostgreSQL (NULLs placed explicitly, as both backends default differently).
    """
    gen = func.coalesce(Commit.generation, -1)
    if descending:
        return [Commit.position.desc().nulls_first(), gen.desc(), Commit.date.desc().nulls_last(), Commit.id.desc()]
    return [Commit.position.asc().nulls_last(), gen.asc(), Commit.date.asc().nulls_first(), Commit.id.asc()]


class Benchmark(Base):
    """An asv benchmark, described by the latest benchmarks.json that named it."""

    __tablename__ = "benchmark"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(512), unique=True)
    type: Mapped[str | None] = mapped_column(String(32))
    unit: Mapped[str | None] = mapped_column(String(64))
    param_names: Mapped[list[Any]] = mapped_column(default=list)
    params: Mapped[list[Any]] = mapped_column(default=list)
    version: Mapped[str | None] = mapped_column(String(128))
    code: Mapped[str | None] = mapped_column(Text)


class Suite(Base):
    """The benchmark names one benchmarks.json listed: the whole suite asv discovered for a run, measured or
    not (``asv run --bench`` lists every benchmark and measures the selected). Shared by the runs that came with
    the same listing (``content_hash`` of the sorted names)."""

    __tablename__ = "suite"

    id: Mapped[int] = mapped_column(primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    names: Mapped[list[str]] = mapped_column(JSON)


class Run(Base):
    """One asv results file (one machine x commit x environment), identified by its content hash."""

    __tablename__ = "run"
    __table_args__ = (Index("ix_run_machine_commit", "machine_id", "commit_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"), index=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id", ondelete="CASCADE"))
    started_at: Mapped[dt.datetime | None] = mapped_column()
    ended_at: Mapped[dt.datetime | None] = mapped_column()
    source_path: Mapped[str] = mapped_column(String(1024))
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    ingested_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # The file's own top-level ``params`` as asv wrote them for this run (machine name, GPU identity,
    # driver, CUDA, torch, triton, arch profile, ...; ``python`` is the file's), so a point's versions are
    # its run's, not the machine's newest. NULL for runs ingested before migration 0005.
    info: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # The suite listed beside the file when it was ingested (migration 0011): a benchmark listed there but not
    # measured was not selected, not deleted. NULL where the folder had no benchmarks.json, and for older runs.
    # A suite.id without a foreign key: SQLite adds a column in place only with an unnamed inline REFERENCES,
    # which no model can match, and suite rows are never deleted.
    suite_id: Mapped[int | None] = mapped_column(Integer)

    machine: Mapped[Machine] = relationship(back_populates="runs")
    commit: Mapped[Commit] = relationship()
    environment: Mapped[Environment] = relationship()
    results: Mapped[list[Result]] = relationship(back_populates="run", passive_deletes=True)


class Result(Base):
    """One benchmark x parameter combination of one run. ``value`` is NULL unless status is 'ok'."""

    __tablename__ = "result"
    __table_args__ = (
        UniqueConstraint("run_id", "benchmark_id", "params_key"),
        CheckConstraint("status IN ('ok', 'failed', 'skipped')", name="status"),
        # History of one series: benchmark + params, then runs (machine via run).
        Index("ix_result_series", "benchmark_id", "params_key", "run_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    benchmark_version: Mapped[str | None] = mapped_column(String(128))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    params_key: Mapped[str] = mapped_column(String(1024))
    status: Mapped[str] = mapped_column(String(16))
    value: Mapped[float | None] = mapped_column(Float)
    ci_99_a: Mapped[float | None] = mapped_column(Float)
    ci_99_b: Mapped[float | None] = mapped_column(Float)
    q_25: Mapped[float | None] = mapped_column(Float)
    q_75: Mapped[float | None] = mapped_column(Float)
    number: Mapped[int | None] = mapped_column(Integer)
    repeat: Mapped[int | None] = mapped_column(Integer)
    samples: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True))
    # asv's started_at of this benchmark (ms since the epoch; migration 0012): a row asv carried over unchanged
    # into a rewritten results file has the started_at of the run that measured it (db.run_writer). NULL before.
    started_ms: Mapped[int | None] = mapped_column(BigInteger)

    run: Mapped[Run] = relationship(back_populates="results")
    benchmark: Mapped[Benchmark] = relationship()


class AlertGroup(Base):
    """Regressions found together on one machine at one commit or commit range (written by ``regressions``).

    The culprit lies in ``(parent_commit, commit]`` in history order: the intersection of its members'
    ranges. ``machine_wide`` when the members are most of the series measured on the machine at
    ``commit`` (``series``), which points at the machine rather than the code.
    """

    __tablename__ = "alert_group"

    id: Mapped[int] = mapped_column(primary_key=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"), index=True)
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    parent_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id", ondelete="SET NULL"))
    machine_wide: Mapped[bool] = mapped_column(default=False)
    series: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    machine: Mapped[Machine] = relationship()
    commit: Mapped[Commit] = relationship(foreign_keys=[commit_id])
    parent_commit: Mapped[Commit | None] = relationship(foreign_keys=[parent_commit_id])
    regressions: Mapped[list[Regression]] = relationship(back_populates="group")

    # A group's status is its most pressing member's (the one rule; the dashboard and CLI both use it).
    STATUS_ORDER: ClassVar[tuple[str, ...]] = (
        "new",
        "suspect",
        "acknowledged",
        "fixed",
        "transient",
        "retired",
        "ignored",
    )

    @staticmethod
    def status_of(statuses: Iterable[str]) -> str:
        """The group status for its members' statuses: the first of ``STATUS_ORDER`` present."""
        present = set(statuses)
        return next((s for s in AlertGroup.STATUS_ORDER if s in present), "ignored")


class Regression(Base):
    """A flagged step in one series, at its first bad commit (written by ``regressions``).

    ``parent_commit`` is the last commit measured at the level before, so the culprit lies in
    ``(parent_commit, commit]``; ``group`` the alert group; ``labels`` e.g. ``returns_to_earlier_level``,
    ``partly_recovered`` (``now_ratio`` then says where the series stands).
    """

    __tablename__ = "regression"
    __table_args__ = (
        UniqueConstraint("benchmark_id", "params_key", "machine_id", "commit_id"),
        CheckConstraint(f"status IN ({', '.join(repr(s) for s in REGRESSION_STATUSES)})", name="status"),
        CheckConstraint("direction IN ('up_is_worse', 'down_is_worse')", name="direction"),
        Index("ix_regression_status", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    params_key: Mapped[str] = mapped_column(String(1024))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    before: Mapped[float] = mapped_column(Float)
    after: Mapped[float] = mapped_column(Float)
    ratio: Mapped[float] = mapped_column(Float)
    direction: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="new")
    p_value: Mapped[float | None] = mapped_column(Float)
    detected_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    fixed_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id", ondelete="SET NULL"))
    parent_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id", ondelete="SET NULL"))
    group_id: Mapped[int | None] = mapped_column(ForeignKey("alert_group.id", ondelete="SET NULL"), index=True)
    labels: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True), default=list)
    # Triage (migration 0008): the person it is assigned to, the issue that tracks it, and who last changed its
    # status from the dashboard (the signed-in user, else the local user).
    assignee: Mapped[str | None] = mapped_column(String(255))
    issue_url: Mapped[str | None] = mapped_column(String(1024))
    status_by: Mapped[str | None] = mapped_column(String(255))
    # Why detection closed it (regressions.policy.CLOSE_REASONS; NULL while open) and at which commit.
    close_reason: Mapped[str | None] = mapped_column(String(32))
    closed_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id", ondelete="SET NULL"))
    # The series' newest level over before, as the newest detection saw it (migration 0010): how far a partly
    # recovered step has come back while the alert keeps the step's numbers. NULL for rows written before it.
    now_ratio: Mapped[float | None] = mapped_column(Float)

    benchmark: Mapped[Benchmark] = relationship()
    machine: Mapped[Machine] = relationship()
    commit: Mapped[Commit] = relationship(foreign_keys=[commit_id])
    fixed_commit: Mapped[Commit | None] = relationship(foreign_keys=[fixed_commit_id])
    closed_commit: Mapped[Commit | None] = relationship(foreign_keys=[closed_commit_id])
    parent_commit: Mapped[Commit | None] = relationship(foreign_keys=[parent_commit_id])
    group: Mapped[AlertGroup | None] = relationship(back_populates="regressions")


class Meta(Base):
    """Small key/value state (e.g. the detector's watermark)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
