"""Why an alert closed: ``regression.close_reason`` (``refuted``, ``machine_event``, ``returned``,
``segment_ended``, ``benchmark_gone``; NULL while open or for a person's status) and
``regression.closed_commit_id``, the commit where it closed (the refuting run, the commit where the level
returned, the first run of the benchmark's next version). Rows closed before this revision keep NULL.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Batch mode copies "regression" on SQLite; nothing references it, so the copy cascades nowhere.
    with op.batch_alter_table("regression") as batch:
        batch.add_column(sa.Column("close_reason", sa.String(32), nullable=True))
        batch.add_column(sa.Column("closed_commit_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_regression_closed_commit_id_commit"), "commit", ["closed_commit_id"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("regression") as batch:
        batch.drop_constraint(op.f("fk_regression_closed_commit_id_commit"), type_="foreignkey")
        batch.drop_column("closed_commit_id")
        batch.drop_column("close_reason")
