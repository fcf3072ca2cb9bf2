"""submitter_groups: fair share between groups of submitters (issue 41)

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-30

Each group's weight and the decayed usage of its members (docs/ordering.md, the
``group-share`` rule), and each submitter's group.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GROUP_KEY = "fk_submitter_shares_group_name_submitter_groups"


def _shares(with_group: bool) -> sa.Table:
    """submitter_shares as 0031 made it (``with_group``: as this revision leaves it):
    SQLite's batch mode copies the table from this definition instead of reflecting it,
    so that the offline SQL (``jobmatch db upgrade --sql``) can be printed too."""
    group: list[sa.SchemaItem] = []
    if with_group:
        group = [
            sa.Column("group_name", sa.String(length=255), nullable=True),
            sa.ForeignKeyConstraint(
                ["group_name"], ["submitter_groups.name"], name=_GROUP_KEY, ondelete="RESTRICT"
            ),
        ]
    return sa.Table(
        "submitter_shares",
        sa.MetaData(),
        sa.Column("submitter", sa.String(length=255), nullable=False),
        sa.Column("weight", sa.Float(), server_default="1", nullable=False),
        sa.Column("usage", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("usage_epoch", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_log2", sa.Float(), nullable=True),
        *group,
        sa.CheckConstraint("weight > 0", name="ck_submitter_shares_weight_positive"),
        sa.CheckConstraint("usage >= 0", name="ck_submitter_shares_usage_not_negative"),
        sa.PrimaryKeyConstraint("submitter", name="pk_submitter_shares"),
    )


def upgrade() -> None:
    op.create_table(
        "submitter_groups",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("weight", sa.Float(), server_default="1", nullable=False),
        sa.Column("usage", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("usage_epoch", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_log2", sa.Float(), nullable=True),
        sa.CheckConstraint("weight > 0", name=op.f("ck_submitter_groups_weight_positive")),
        sa.CheckConstraint("usage >= 0", name=op.f("ck_submitter_groups_usage_not_negative")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_submitter_groups")),
    )
    # SQLite adds a foreign key only by copying the table (a small one: one row per
    # submitter).
    with op.batch_alter_table("submitter_shares", copy_from=_shares(with_group=False)) as batch:
        batch.add_column(sa.Column("group_name", sa.String(length=255), nullable=True))
        batch.create_foreign_key(
            op.f(_GROUP_KEY),
            "submitter_groups",
            ["group_name"],
            ["name"],
            ondelete="RESTRICT",
        )


def downgrade() -> None:
    with op.batch_alter_table("submitter_shares", copy_from=_shares(with_group=True)) as batch:
        batch.drop_constraint(op.f(_GROUP_KEY), type_="foreignkey")
        batch.drop_column("group_name")
    op.drop_table("submitter_groups")
