"""What the store accepts: the documented limits of ingest (docs/ingest.md), one place for both backends.

SQLite stores nearly anything (no length limit on VARCHAR, 64-bit integers, any date string) while
PostgreSQL refuses what does not fit its column types. Ingest checks every value against these limits
before writing, so a file is refused the same way on both and a store never holds on SQLite what the
same file could not put into PostgreSQL. String lengths come from the models' column types.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Column, String

from db.models import Benchmark, Commit, Environment, Machine, Result, Run

MAX_FILE_BYTES = 64 * 1024 * 1024  # asv results files are kilobytes to a few megabytes
MAX_NESTING = 32  # JSON levels in stored objects (machine info, requirements, env_vars); asv writes 2-3
MAX_COMBINATIONS = 100_000  # parameter combinations of one benchmark in one file
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # any integer anywhere in a file
COUNT_MAX = 2**31 - 1  # stats_number, stats_repeat, gpu_sm_count (INTEGER columns on PostgreSQL)
MAX_SECONDS = 86_400.0  # a time benchmark's value, quartiles and samples: 0 .. one day
MAX_BYTES_VALUE = float(2**63)  # mem_/peakmem_ benchmarks: 0 .. 2**63 bytes
# Dates (commit date, started_at, started_at + duration), as naive UTC.
MIN_DATE = dt.datetime(1970, 1, 1)
MAX_DATE = dt.datetime(2100, 1, 1)  # exclusive


def text_limit(column: Column | object) -> int:
    """The length limit of a string column (``Machine.name`` -> 255), from the model."""
    col_type = getattr(column, "type", None)
    if not isinstance(col_type, String) or col_type.length is None:
        raise TypeError(f"{column!r} is not a VARCHAR column with a length")
    return int(col_type.length)


MACHINE_NAME = text_limit(Machine.name)
ENV_NAME = text_limit(Environment.name)
PYTHON_VERSION = text_limit(Environment.python)
COMMIT_SHA = text_limit(Commit.sha)
BENCHMARK_NAME = text_limit(Benchmark.name)
BENCHMARK_TYPE = text_limit(Benchmark.type)
BENCHMARK_UNIT = text_limit(Benchmark.unit)
BENCHMARK_VERSION = min(text_limit(Benchmark.version), text_limit(Result.benchmark_version))
PARAMS_KEY = text_limit(Result.params_key)
SOURCE_PATH = text_limit(Run.source_path)
COMMIT_BRANCH = text_limit(Commit.branch)
COMMIT_AUTHOR = text_limit(Commit.author)
# The machine description's string columns (os, cpu, gpu_name, ...) and their length limits.
MACHINE_TEXT: dict[str, int] = {
    col.name: int(col.type.length)
    for col in Machine.__table__.columns
    if isinstance(col.type, String) and col.type.length is not None and col.name != "name"
}
