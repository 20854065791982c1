"""Commit position: each commit's place in history, so a commit git did not know (no generation) sorts by its
date among the others instead of before the whole history. Filled here from the rows already stored, then
kept by every ingest (``db.history_order``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.history_order import renumber

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("commit", sa.Column("position", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_commit_position"), "commit", ["position"])
    renumber(op.get_bind())


def downgrade() -> None:
    # In place, not batch mode (see 0003: a batch copy of "commit" would cascade to every run).
    op.drop_index(op.f("ix_commit_position"), table_name="commit")
    op.drop_column("commit", "position")
