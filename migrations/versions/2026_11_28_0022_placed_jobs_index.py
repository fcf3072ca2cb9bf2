"""ix_jobs_awaiting_pickup: a worker's placed jobs without its history

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

Every pull asks whether its worker has a placed job to deliver (awaiting_pickup). Through
ix_jobs_worker_id that question read every job the worker ever ran, a cost that grew with
the worker's history (issue 23: 41 buffer reads for the lock of a pull after some 400 jobs
per worker in bench/http_floor.py). A partial index over the placed jobs answers it with
one seek. The predicate is each database's own rendering of ``awaiting_pickup IS true``,
the form the queries use.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_awaiting_pickup",
        "jobs",
        ["worker_id"],
        postgresql_where=sa.text("awaiting_pickup IS TRUE"),
        sqlite_where=sa.text("awaiting_pickup IS 1"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_awaiting_pickup", table_name="jobs")
