"""Where the series stands now: ``regression.now_ratio``, its newest level over the alert's ``before`` as the
newest detection saw it. An open alert keeps the numbers of its step (a 2.0x slowdown stays 2.0x) when a later
commit brings the series part of the way back (``partly_recovered``): this says how bad it is now (1.3x).
Nullable: rows written before this revision keep NULL until detection sees their step again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Adding a nullable column is in place in batch mode too (SQLite: no table copy; PostgreSQL: no rewrite).
    with op.batch_alter_table("regression") as batch:
        batch.add_column(sa.Column("now_ratio", sa.Float(), nullable=True))


def downgrade() -> None:
    # Batch mode copies "regression" on SQLite to drop a column; nothing references it, so the copy cascades nowhere.
    with op.batch_alter_table("regression") as batch:
        batch.drop_column("now_ratio")
