"""inventory count spans: per worker and type, the size of the smallest subtree of a vertex
of the type, so that whole-vertex requests skip workers with too few untouched vertices
before scanning their subtrees

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NOT NULL with a default: a plain ADD COLUMN on both databases (no table copy on
    # SQLite). 1 is the weakest bound (a vertex spans itself); the UPDATE makes it exact.
    op.add_column(
        "inventory_counts",
        sa.Column("span", sa.Integer(), nullable=False, server_default=sa.text("1")),
    )
    op.execute(
        "UPDATE inventory_counts SET span = COALESCE(("
        "SELECT MIN(v.last_position - v.position + 1) FROM inventory_vertices v "
        "WHERE v.worker_id = inventory_counts.worker_id AND v.type = inventory_counts.type "
        "AND COALESCE(v.unit, '') = inventory_counts.unit), 1)"
    )


def downgrade() -> None:
    with op.batch_alter_table("inventory_counts", schema=None) as batch_op:
        batch_op.drop_column("span")
