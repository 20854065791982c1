"""Regressions found by the detector, and a small key/value table for its state.

Revision ID: 0002
Revises: 0001
Create Date: 2025-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "regression",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("params_key", sa.String(1024), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("before", sa.Float(), nullable=False),
        sa.Column("after", sa.Float(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("detected_at", sa.DateTime(), nullable=False),
        sa.Column("fixed_commit_id", sa.Integer(), nullable=True),
        sa.CheckConstraint("status IN ('new', 'acknowledged', 'fixed', 'ignored')", name=op.f("ck_regression_status")),
        sa.CheckConstraint("direction IN ('up_is_worse', 'down_is_worse')", name=op.f("ck_regression_direction")),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            name=op.f("fk_regression_benchmark_id_benchmark"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_regression_machine_id_machine"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commit.id"], name=op.f("fk_regression_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["fixed_commit_id"],
            ["commit.id"],
            name=op.f("fk_regression_fixed_commit_id_commit"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regression")),
        sa.UniqueConstraint(
            "benchmark_id",
            "params_key",
            "machine_id",
            "commit_id",
            name=op.f("uq_regression_benchmark_id_params_key_machine_id_commit_id"),
        ),
    )
    op.create_index("ix_regression_status", "regression", ["status"])
    op.create_table(
        "meta",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_meta")),
    )


def downgrade() -> None:
    op.drop_table("meta")
    op.drop_index("ix_regression_status", table_name="regression")
    op.drop_table("regression")
