"""Alert groups and alert states: regressions found together on one machine at one commit range form a
group; statuses suspect (seen only in the newest runs), transient (refuted) and retired (series gone);
each regression keeps the commit range its culprit lies in (parent_commit_id) and labels.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

OLD = ("new", "acknowledged", "fixed", "ignored")
NEW = ("suspect", "new", "acknowledged", "fixed", "ignored", "transient", "retired")


def _check(statuses: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(s) for s in statuses)})"


def upgrade() -> None:
    op.create_table(
        "alert_group",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("parent_commit_id", sa.Integer(), nullable=True),
        sa.Column("machine_wide", sa.Boolean(), nullable=False),
        sa.Column("series", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_alert_group_machine_id_machine"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commit.id"], name=op.f("fk_alert_group_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["parent_commit_id"],
            ["commit.id"],
            name=op.f("fk_alert_group_parent_commit_id_commit"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_group")),
    )
    op.create_index(op.f("ix_alert_group_machine_id"), "alert_group", ["machine_id"])
    # SQLite alters a table by copying it (batch mode); nothing references "regression", so the copy
    # cascades nowhere.
    with op.batch_alter_table("regression") as batch:
        batch.add_column(sa.Column("parent_commit_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("group_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("labels", sa.JSON(none_as_null=True), nullable=True))
        batch.create_foreign_key(
            op.f("fk_regression_parent_commit_id_commit"), "commit", ["parent_commit_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_foreign_key(
            op.f("fk_regression_group_id_alert_group"), "alert_group", ["group_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_regression_group_id"), ["group_id"])
        batch.drop_constraint(op.f("ck_regression_status"), type_="check")
        batch.create_check_constraint(op.f("ck_regression_status"), _check(NEW))


def downgrade() -> None:
    # The older schema knows four statuses: suspects count as new, refuted and retired ones as ignored.
    regression = sa.table("regression", sa.column("status", sa.String))
    op.execute(regression.update().where(regression.c.status == "suspect").values(status="new"))
    op.execute(regression.update().where(regression.c.status.in_(["transient", "retired"])).values(status="ignored"))
    with op.batch_alter_table("regression") as batch:
        batch.drop_constraint(op.f("ck_regression_status"), type_="check")
        batch.create_check_constraint(op.f("ck_regression_status"), _check(OLD))
        batch.drop_index(op.f("ix_regression_group_id"))
        batch.drop_constraint(op.f("fk_regression_group_id_alert_group"), type_="foreignkey")
        batch.drop_constraint(op.f("fk_regression_parent_commit_id_commit"), type_="foreignkey")
        batch.drop_column("labels")
        batch.drop_column("group_id")
        batch.drop_column("parent_commit_id")
    op.drop_index(op.f("ix_alert_group_machine_id"), table_name="alert_group")
    op.drop_table("alert_group")
