"""Test-wide setup: kernels run on the GPU when present, else on the CPU under the Triton interpreter."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

# Must happen before triton is imported anywhere: without a GPU the kernels run in the interpreter.
if os.environ.get("MLAPERF_FORCE_INTERPRET") == "1":
    os.environ["TRITON_INTERPRET"] = "1"
else:
    try:
        import torch

        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass


@pytest.fixture
def pg_schema_url() -> Iterator[Callable[[str], str]]:
    """Factory of PostgreSQL URLs, each on a fresh schema dropped at teardown (server: MLAPERF_TEST_PG_URL).

    Skips when the variable is unset, unless MLAPERF_REQUIRE_PG=1 (CI), where it fails.
    """
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    base = os.environ.get("MLAPERF_TEST_PG_URL")
    if not base:
        if os.environ.get("MLAPERF_REQUIRE_PG") == "1":
            pytest.fail("MLAPERF_REQUIRE_PG=1 but MLAPERF_TEST_PG_URL is not set")
        pytest.skip("MLAPERF_TEST_PG_URL not set (start one with scripts/pg.sh start)")
    admin = sa.create_engine(base)
    schemas: list[str] = []

    def make(prefix: str = "t") -> str:
        schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        schemas.append(schema)
        return make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )

    try:
        yield make
    finally:
        with admin.begin() as conn:
            for schema in schemas:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
