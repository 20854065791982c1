"""Initial schema: machines, environments, commits, benchmarks, runs, results.

Revision ID: 0001
Revises:
Create Date: 2025-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "machine",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("os", sa.String(255), nullable=True),
        sa.Column("arch", sa.String(64), nullable=True),
        sa.Column("cpu", sa.String(255), nullable=True),
        sa.Column("num_cpu", sa.String(32), nullable=True),
        sa.Column("ram", sa.String(64), nullable=True),
        sa.Column("gpu_name", sa.String(255), nullable=True),
        sa.Column("gpu_cc", sa.String(16), nullable=True),
        sa.Column("gpu_sm_count", sa.Integer(), nullable=True),
        sa.Column("gpu_memory_gb", sa.Float(), nullable=True),
        sa.Column("gpu_driver", sa.String(64), nullable=True),
        sa.Column("cuda", sa.String(64), nullable=True),
        sa.Column("torch", sa.String(64), nullable=True),
        sa.Column("triton", sa.String(64), nullable=True),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine")),
        sa.UniqueConstraint("name", name=op.f("uq_machine_name")),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("python", sa.String(32), nullable=True),
        sa.Column("requirements", sa.JSON(), nullable=False),
        sa.Column("env_vars", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment")),
        sa.UniqueConstraint("name", name=op.f("uq_environment_name")),
    )
    op.create_table(
        "commit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("date", sa.DateTime(), nullable=True),
        sa.Column("parents", sa.JSON(), nullable=True),
        sa.Column("branch", sa.String(255), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("author", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_commit")),
        sa.UniqueConstraint("sha", name=op.f("uq_commit_sha")),
    )
    op.create_index(op.f("ix_commit_date"), "commit", ["date"])
    op.create_table(
        "benchmark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("type", sa.String(32), nullable=True),
        sa.Column("unit", sa.String(64), nullable=True),
        sa.Column("param_names", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("code", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmark")),
        sa.UniqueConstraint("name", name=op.f("uq_benchmark_name")),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("source_path", sa.String(1024), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("ingested_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_run_machine_id_machine"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["commit_id"], ["commit.id"], name=op.f("fk_run_commit_id_commit"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_run_environment_id_environment"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_run_content_hash")),
    )
    op.create_index(op.f("ix_run_commit_id"), "run", ["commit_id"])
    op.create_index("ix_run_machine_commit", "run", ["machine_id", "commit_id"])
    op.create_table(
        "result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_version", sa.String(128), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("params_key", sa.String(1024), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("ci_99_a", sa.Float(), nullable=True),
        sa.Column("ci_99_b", sa.Float(), nullable=True),
        sa.Column("q_25", sa.Float(), nullable=True),
        sa.Column("q_75", sa.Float(), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("repeat", sa.Integer(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=True),
        sa.CheckConstraint("status IN ('ok', 'failed', 'skipped')", name=op.f("ck_result_status")),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_result_run_id_run"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            name=op.f("fk_result_benchmark_id_benchmark"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result")),
        sa.UniqueConstraint(
            "run_id", "benchmark_id", "params_key", name=op.f("uq_result_run_id_benchmark_id_params_key")
        ),
    )
    op.create_index("ix_result_series", "result", ["benchmark_id", "params_key", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_result_series", table_name="result")
    op.drop_table("result")
    op.drop_index("ix_run_machine_commit", table_name="run")
    op.drop_index(op.f("ix_run_commit_id"), table_name="run")
    op.drop_table("run")
    op.drop_table("benchmark")
    op.drop_index(op.f("ix_commit_date"), table_name="commit")
    op.drop_table("commit")
    op.drop_table("environment")
    op.drop_table("machine")
