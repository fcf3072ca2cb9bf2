"""queue_instances: states (qmod -d/-s as qstat's letters d, s) and per-host seq_no and
load_thresholds; scheduler_config: queue_sort_method and load_formula (sched_conf(5))

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29

Existing instances are enabled and unsuspended and take their cluster queue's seq_no and
load_thresholds (NULL); without a scheduler_config row the queue sort stays seq_no, then
creation order, as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs (a constant default, no constraint): SQLite needs no table copy,
    # and `jobmatch db upgrade --sql` can print them without a database to reflect.
    op.add_column(
        "queue_instances",
        sa.Column("states", sa.String(length=2), server_default="", nullable=False),
    )
    op.add_column("queue_instances", sa.Column("seq_no", sa.Integer(), nullable=True))
    op.add_column("queue_instances", sa.Column("load_thresholds", sa.Text(), nullable=True))
    op.create_table(
        "scheduler_config",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("queue_sort_method", sa.String(length=8), nullable=False),
        sa.Column("load_formula", sa.Text(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_scheduler_config_single_row")),
        sa.CheckConstraint(
            "queue_sort_method IN ('load', 'seqno')",
            name=op.f("ck_scheduler_config_sort_method_known"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduler_config")),
    )


def downgrade() -> None:
    op.drop_table("scheduler_config")
    with op.batch_alter_table("queue_instances") as batch:
        for column in ("load_thresholds", "seq_no", "states"):
            batch.drop_column(column)
