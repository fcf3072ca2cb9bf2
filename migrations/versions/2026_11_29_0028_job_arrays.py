"""job_arrays and jobs.array_id, jobs.task_id: Grid Engine array jobs (qsub -t n-m:s) and
their limit of running tasks (qsub -tc)

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29

Each task of an array is a job of its own, with the array's id, its task id and the
array's range (n-m:s, for the command's SGE_TASK_FIRST/LAST/STEPSIZE) (issue 38).
jobs.array_id has no foreign key (as category_fits): a bulk submission of many tasks would
check one per row. ix_jobs_array_state counts an array's running tasks for -tc.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_arrays",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("first_task", sa.Integer(), nullable=False),
        sa.Column("last_task", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("task_concurrency", sa.Integer(), nullable=True),
        sa.Column("submitter", sa.String(length=255), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("first_task >= 1", name=op.f("ck_job_arrays_first_task_positive")),
        sa.CheckConstraint(
            "last_task >= first_task", name=op.f("ck_job_arrays_last_task_not_before_first")
        ),
        sa.CheckConstraint("step >= 1", name=op.f("ck_job_arrays_step_positive")),
        sa.CheckConstraint(
            "task_concurrency >= 1", name=op.f("ck_job_arrays_task_concurrency_positive")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_arrays")),
    )
    op.add_column("jobs", sa.Column("array_id", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("task_id", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("task_range", sa.String(length=64), nullable=True))
    op.create_index("ix_jobs_array_state", "jobs", ["array_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_jobs_array_state", table_name="jobs")
    # ALTER TABLE ... DROP COLUMN on both databases (SQLite has it since 3.35): the columns
    # carry no constraint, and a batch copy of jobs would need the whole table reflected,
    # which `jobmatch db downgrade --sql` (no database) cannot do.
    for column in ("task_range", "task_id", "array_id"):
        op.drop_column("jobs", column)
    op.drop_table("job_arrays")
