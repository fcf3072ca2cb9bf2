"""categories and jobs: Grid Engine -q, -masterq and -soft -q lists; category_queue_refs;
queues: load_thresholds

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LISTS = ("queue_list", "master_queue_list", "soft_queue_list")


def upgrade() -> None:
    with op.batch_alter_table("categories") as batch:
        for column in _LISTS:
            batch.add_column(sa.Column(column, sa.Text(), server_default="NONE", nullable=False))
    with op.batch_alter_table("jobs") as batch:
        for column in _LISTS:
            batch.add_column(sa.Column(column, sa.Text(), nullable=True))
    op.create_table(
        "category_queue_refs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("list", sa.String(length=8), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("queue_text", sa.Text(), nullable=False),
        sa.Column("queue_regex", sa.Text(), nullable=False),
        sa.Column("host_text", sa.Text(), nullable=True),
        sa.Column("host_regex", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "list IN ('hard', 'master', 'soft')", name=op.f("ck_category_queue_refs_list_known")
        ),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_queue_refs_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_category_queue_refs")),
    )
    op.create_index(
        "ix_category_queue_refs_category", "category_queue_refs", ["category_id", "list"]
    )
    with op.batch_alter_table("queues") as batch:
        batch.add_column(
            sa.Column("load_thresholds", sa.Text(), server_default="NONE", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.drop_column("load_thresholds")
    op.drop_index("ix_category_queue_refs_category", table_name="category_queue_refs")
    op.drop_table("category_queue_refs")
    with op.batch_alter_table("jobs") as batch:
        for column in _LISTS:
            batch.drop_column(column)
    with op.batch_alter_table("categories") as batch:
        for column in _LISTS:
            batch.drop_column(column)
