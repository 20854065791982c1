"""When asv measured each result: ``result.started_ms``, the ``started_at`` asv writes per benchmark (ms since the
epoch). asv re-running part of a commit's suite (``asv run --bench X`` where a results file exists) rewrites the
file with every other benchmark's row as it was, ``started_at`` included; ingest now stores those rows once, not
as a second run that would confirm a suspect step nobody measured again. NULL for results stored before this
revision and for files without the column.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # A nullable column: in place on SQLite (no copy of the largest table), without a rewrite on PostgreSQL.
    op.add_column("result", sa.Column("started_ms", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE result DROP COLUMN started_ms")  # SQLite 3.35+, in place (see upgrade)
    else:
        op.drop_column("result", "started_ms")
