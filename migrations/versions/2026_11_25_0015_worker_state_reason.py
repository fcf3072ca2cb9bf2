"""worker lifecycle: why a worker is in its state, who put it there and when; a
submitter's jobs in id order

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

An administrator drains or disables a worker with PATCH /v1/workers/{name} and a free-text
reason; these columns keep that reason, the token that set it (its role and subject) and the
time, so that the people who look at the cluster see why a worker gets no work. The new
state ``disabled`` needs no change here: states are stored as short strings without a CHECK
constraint (app/db/models/enums.py).

``ix_jobs_submitter_id`` serves GET /v1/jobs for a submitter, whose own jobs are now
filtered in SQL before the page is cut (they were filtered after it, leaving empty pages).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("state_reason", sa.Text(), nullable=True))
    op.add_column("workers", sa.Column("state_set_by", sa.String(length=255), nullable=True))
    op.add_column(
        "workers", sa.Column("state_changed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index("ix_jobs_submitter_id", "jobs", ["submitter", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_submitter_id", table_name="jobs")
    op.drop_column("workers", "state_changed_at")
    op.drop_column("workers", "state_set_by")
    op.drop_column("workers", "state_reason")
