"""Triage fields of a regression: who it is assigned to (``assignee``), the issue that tracks it
(``issue_url``), and who last changed its status from the dashboard (``status_by``: the signed-in user, or
the local user where the dashboard has no sign-in). All nullable: rows stored before keep NULL.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = (("assignee", 255), ("issue_url", 1024), ("status_by", 255))


def upgrade() -> None:
    # Nullable columns: SQLite adds them in place (no table copy), PostgreSQL without a rewrite.
    for name, length in COLUMNS:
        op.add_column("regression", sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    for name, _ in reversed(COLUMNS):
        if op.get_bind().dialect.name == "sqlite":
            # Not batch mode: copying "regression" would drop and recreate it; SQLite 3.35+ drops in place.
            op.execute(f"ALTER TABLE regression DROP COLUMN {name}")
        else:
            op.drop_column("regression", name)
