"""inventory room indexes: the worker's rank on its free counts and inventory, so that the
scheduler's survivors query seeks the first workers with room instead of walking full ones

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Partial index predicates: rows of types with something free, entirely free nodes.
ROOM = "free > 0"
UNTOUCHED = "untouched = vertices"
STATISTICS = "st_worker_inventories_untouched"


def _expression_statistics() -> bool:
    """Statistics on expressions exist on PostgreSQL 14 and later (offline, the version
    is unknown: assumed recent)."""
    dialect = op.get_context().dialect
    version = dialect.server_version_info
    return dialect.name == "postgresql" and (version is None or version >= (14,))


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table copy on SQLite).
    op.add_column("inventory_counts", sa.Column("rank", sa.Integer(), nullable=True))
    op.add_column("worker_inventories", sa.Column("rank", sa.Integer(), nullable=True))
    for table in ("inventory_counts", "worker_inventories"):
        op.execute(
            f"UPDATE {table} SET rank = (SELECT workers.rank FROM workers "
            f"WHERE workers.id = {table}.worker_id)"
        )
    op.create_index(
        "ix_inventory_counts_room",
        "inventory_counts",
        ["type", "unit", "rank", "worker_id"],
        unique=False,
        sqlite_where=sa.text(ROOM),
        postgresql_where=sa.text(ROOM),
    )
    if _expression_statistics():
        # The planner's guess for a comparison of two columns is 0.5% of the rows; with
        # it, the whole-node query sorted every untouched node instead of walking the
        # partial index in rank order and stopping at the first few.
        op.execute(f"CREATE STATISTICS {STATISTICS} ON ({UNTOUCHED}) FROM worker_inventories")
    op.create_index(
        "ix_worker_inventories_untouched",
        "worker_inventories",
        ["rank", "worker_id"],
        unique=False,
        sqlite_where=sa.text(UNTOUCHED),
        postgresql_where=sa.text(UNTOUCHED),
    )


def downgrade() -> None:
    if _expression_statistics():
        op.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")
    op.drop_index("ix_worker_inventories_untouched", table_name="worker_inventories")
    op.drop_index("ix_inventory_counts_room", table_name="inventory_counts")
    with op.batch_alter_table("worker_inventories", schema=None) as batch_op:
        batch_op.drop_column("rank")
    with op.batch_alter_table("inventory_counts", schema=None) as batch_op:
        batch_op.drop_column("rank")
