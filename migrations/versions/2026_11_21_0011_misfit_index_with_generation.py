"""misfit index with the generation, so a pull reads a worker's misfits index-only

Revision ID: 0011
Revises: 0006
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("category_misfits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_category_misfits_worker"))
        batch_op.create_index(
            "ix_category_misfits_worker", ["worker_id", "generation", "category_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("category_misfits", schema=None) as batch_op:
        batch_op.drop_index("ix_category_misfits_worker")
        batch_op.create_index(
            batch_op.f("ix_category_misfits_worker"), ["worker_id", "category_id"], unique=False
        )
