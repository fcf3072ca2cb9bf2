"""bulk_idempotency_keys: Idempotency-Key of POST /v1/jobs/bulk (issue 38)

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-30

A retried bulk submission whose first answer was lost gets the jobs the first one
stored instead of storing them again: the key, per submitter, with a hash of the body and
the ids of its jobs as an RFC 22 idset.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bulk_idempotency_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submitter", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("job_ids", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bulk_idempotency_keys")),
        sa.UniqueConstraint(
            "submitter", "key", name=op.f("uq_bulk_idempotency_keys_submitter_key")
        ),
    )


def downgrade() -> None:
    op.drop_table("bulk_idempotency_keys")
