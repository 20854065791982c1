"""What each run's suite listed: table ``suite`` (the benchmark names of one benchmarks.json, shared by the
runs that came with it) and ``run.suite_id``. ``asv run --bench`` measures a subset but lists the whole suite,
so a benchmark a run did not measure and its listing names was not selected, not deleted: detection no longer
retires its alerts as gone there. Runs stored before this revision keep NULL (the share rule alone).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "suite",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("names", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suite")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_suite_content_hash")),
    )
    # A nullable column, no foreign key (see db.models.Run.suite_id): in place on SQLite (no copy of "run", whose
    # drop would cascade to every result), without a rewrite on PostgreSQL.
    op.add_column("run", sa.Column("suite_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE run DROP COLUMN suite_id")  # SQLite 3.35+, in place (see upgrade)
    else:
        op.drop_column("run", "suite_id")
    op.drop_table("suite")
