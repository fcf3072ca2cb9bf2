"""quota_sets, quota_limits, quota_usage, quota_bookings: Grid Engine resource quota sets
and their books

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quota_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quota_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_quota_sets_name")),
    )
    op.create_table(
        "quota_limits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("rule_index", sa.Integer(), nullable=False),
        sa.Column("rule_label", sa.String(length=512), nullable=False),
        sa.Column("attribute_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("number", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["attribute_id"],
            ["attributes.id"],
            name=op.f("fk_quota_limits_attribute_id_attributes"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["set_id"],
            ["quota_sets.id"],
            name=op.f("fk_quota_limits_set_id_quota_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quota_limits")),
        sa.UniqueConstraint(
            "set_id",
            "rule_index",
            "attribute_id",
            name=op.f("uq_quota_limits_set_id_rule_index_attribute_id"),
        ),
    )
    with op.batch_alter_table("quota_limits", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_quota_limits_attribute_id"), ["attribute_id"], unique=False
        )
    op.create_table(
        "quota_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("limit_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=1024), nullable=False),
        sa.Column("used", sa.Float(), nullable=False),
        sa.CheckConstraint("used >= 0", name=op.f("ck_quota_usage_used_not_negative")),
        sa.ForeignKeyConstraint(
            ["limit_id"],
            ["quota_limits.id"],
            name=op.f("fk_quota_usage_limit_id_quota_limits"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quota_usage")),
        sa.UniqueConstraint("limit_id", "key", name=op.f("uq_quota_usage_limit_id_key")),
    )
    op.create_table(
        "quota_bookings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("usage_id", sa.Integer(), nullable=False),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.CheckConstraint("amount >= 0", name=op.f("ck_quota_bookings_amount_not_negative")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_quota_bookings_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["usage_id"],
            ["quota_usage.id"],
            name=op.f("fk_quota_bookings_usage_id_quota_usage"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quota_bookings")),
    )
    with op.batch_alter_table("quota_bookings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_quota_bookings_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_quota_bookings_usage_id"), ["usage_id"], unique=False)


def downgrade() -> None:
    op.drop_table("quota_bookings")
    op.drop_table("quota_usage")
    op.drop_table("quota_limits")
    op.drop_table("quota_sets")
