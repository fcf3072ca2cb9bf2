"""jobs.awaiting_pickup: a job the scheduler placed on a worker that has not pulled it yet

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

POST /v1/schedule and POST /v1/jobs/{id}/allocate start a job on a worker that did not ask
for it; the worker learns of it on its next pull, which delivers placed jobs first. Until
then the lease sweep measures the lease from the placement (issue 22).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (native on SQLite with a default), so that `--sql` works offline.
    op.add_column(
        "jobs",
        sa.Column("awaiting_pickup", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("awaiting_pickup")
