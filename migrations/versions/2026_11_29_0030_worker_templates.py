"""worker_templates: the kinds of worker an autoscaler can create (issue 40)

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29

``GET /v1/demand?templates=...`` simulates new workers of these kinds, and a job that no
registered worker fits but a template could run waits instead of failing at submission.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker_templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("max_count", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_templates")),
        sa.UniqueConstraint("name", name=op.f("uq_worker_templates_name")),
    )


def downgrade() -> None:
    op.drop_table("worker_templates")
