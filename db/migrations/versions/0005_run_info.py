"""Per-run provenance: ``run.info`` holds the results file's own top-level ``params`` (machine name, GPU
identity, driver, CUDA, torch, triton, arch profile, python, ...), so each point of a history shows the
versions of the run that produced it. Runs stored before this revision keep NULL there (their files'
params were merged into ``machine.info`` only).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # A nullable column: SQLite adds it in place (no table copy), PostgreSQL without a rewrite.
    op.add_column("run", sa.Column("info", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Not batch mode: it would copy "run" and drop the original, and with foreign keys on, dropping
        # it deletes every result (ON DELETE CASCADE). SQLite 3.35+ drops a plain column in place.
        op.execute("ALTER TABLE run DROP COLUMN info")
    else:
        op.drop_column("run", "info")
