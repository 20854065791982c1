"""Commit generation (git ancestor count), so commits sharing one asv date keep their git order.

Revision ID: 0003
Revises: 0002
Create Date: 2025-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("commit", sa.Column("generation", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_commit_generation"), "commit", ["generation"])


def downgrade() -> None:
    # Plain ALTER TABLE .. DROP COLUMN (SQLite >= 3.35), not batch mode: a batch copy would drop and
    # recreate "commit", and with foreign keys on, dropping it cascades to every run.
    op.drop_index(op.f("ix_commit_generation"), table_name="commit")
    op.drop_column("commit", "generation")
