"""submitter_shares: fair share between submitters (issue 41)

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-30

Each submitter's share weight and its usage, decayed lazily from ``usage_at`` with the
deployment's half-life (docs/ordering.md); and the index the fair-share pull seeks in for
the best waiting job of one submitter in one category.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "submitter_shares",
        sa.Column("submitter", sa.String(length=255), nullable=False),
        sa.Column("weight", sa.Float(), server_default="1", nullable=False),
        sa.Column("usage", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("usage_epoch", sa.Float(), server_default="0", nullable=False),
        sa.Column("usage_log2", sa.Float(), nullable=True),
        sa.CheckConstraint("weight > 0", name=op.f("ck_submitter_shares_weight_positive")),
        sa.CheckConstraint("usage >= 0", name=op.f("ck_submitter_shares_usage_not_negative")),
        sa.PrimaryKeyConstraint("submitter", name=op.f("pk_submitter_shares")),
    )
    op.create_index(
        "ix_jobs_waiting_submitter_order",
        "jobs",
        ["category_id", "submitter", sa.text("priority DESC"), "submitted_at", "id"],
        sqlite_where=sa.text("state = 'waiting'"),
        postgresql_where=sa.text("state = 'waiting'"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_waiting_submitter_order", table_name="jobs")
    op.drop_table("submitter_shares")
