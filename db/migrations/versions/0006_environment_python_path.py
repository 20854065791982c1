"""``environment.python`` holds what asv writes there: a version ("3.12") for the environments asv builds,
and the interpreter's path for an ``existing`` one (``asv run --python=same``, how ``mlaperf run`` runs
asv), e.g. ``/home/runner/_work/mlaperf/mlaperf/.venv/bin/python``. 32 characters refused such runs; the
column now takes 1,024 like the other path columns.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def _sqlite_retype(length: int) -> None:
    # Not batch mode: it would copy "environment" and drop the original, and with foreign keys on that
    # deletes every run (run.environment_id is ON DELETE CASCADE). Column operations in place instead
    # (SQLite 3.35+): a new column, the values copied (cut to the new length), the old one dropped.
    op.execute(f"ALTER TABLE environment ADD COLUMN python_new VARCHAR({length})")
    op.execute(f"UPDATE environment SET python_new = substr(python, 1, {length})")
    op.execute("ALTER TABLE environment DROP COLUMN python")
    op.execute("ALTER TABLE environment RENAME COLUMN python_new TO python")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_retype(1024)
    else:
        op.alter_column("environment", "python", type_=sa.String(1024), existing_type=sa.String(32))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_retype(32)
    else:
        op.alter_column("environment", "python", type_=sa.String(32), existing_type=sa.String(1024),
                        postgresql_using="left(python, 32)")  # fmt: skip
