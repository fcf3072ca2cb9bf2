"""held_by without a foreign key: the vertex rows' copy of the active exclusive booking's
job, vouched for by the inventory invariants instead of a key checked once per held row

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-22

PostgreSQL checked the key once for every row a booking holds: 39 checks for a whole
node of the bench's inventory, 4 for four cores. With it dropped, the booking statement
of a 4-core job took 2.1 ms instead of 2.5-2.8 ms, and a 4-node job 9.7-9.9 ms instead of
12.5-13.4 ms (bench/allocation.py's steady state at 4,096 nodes). The key only said that
some job of that id exists; app/matching/allocation/invariants.py checks that the row's
job has an active exclusive booking over it, and that every such booking's rows are held
by its job (``jobmatch db check``). Its ON DELETE SET NULL had nothing left to do: jobs
are deleted only before they ever run (a lost idempotency race), and nulling held_by
alone would have left the free counts wrong.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = "fk_inventory_vertices_held_by_jobs"


def _vertices(with_key: bool) -> sa.Table:
    """inventory_vertices as 0006 made it (with or without the key): SQLite's batch mode
    copies the table from this definition instead of reflecting it, so that the offline
    SQL (``jobmatch db upgrade --sql``) can be printed too."""
    keys = [
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name="fk_inventory_vertices_worker_id_workers",
            ondelete="CASCADE",
        )
    ]
    if with_key:
        keys.append(
            sa.ForeignKeyConstraint(["held_by"], ["jobs.id"], name=KEY, ondelete="SET NULL")
        )
    return sa.Table(
        "inventory_vertices",
        sa.MetaData(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("last_position", sa.Integer(), nullable=False),
        sa.Column("parent_position", sa.Integer(), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=False),
        sa.Column("logical_id", sa.BigInteger(), nullable=False),
        sa.Column("unit", sa.String(length=64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.Column("shared", sa.Integer(), nullable=False),
        sa.Column("held_by", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "held_by IS NULL OR (shared = 0 AND used = 0)", name="ck_inventory_vertices_held_alone"
        ),
        sa.CheckConstraint("shared >= 0", name="ck_inventory_vertices_shared_not_negative"),
        sa.CheckConstraint(
            "used >= 0 AND used <= size", name="ck_inventory_vertices_used_within_size"
        ),
        *keys,
        sa.PrimaryKeyConstraint("id", name="pk_inventory_vertices"),
        sa.Index("ix_inventory_vertices_worker_position", "worker_id", "position", unique=True),
    )


def upgrade() -> None:
    # On SQLite, batch mode copies the table (Alembic's connection has foreign keys off,
    # so dropping the original cascades nothing into inventory_bookings).
    with op.batch_alter_table(
        "inventory_vertices", schema=None, copy_from=_vertices(with_key=True)
    ) as batch_op:
        batch_op.drop_constraint(KEY, type_="foreignkey")


def downgrade() -> None:
    # A row held by a job that no longer exists would fail the key: release it first.
    op.execute(
        "UPDATE inventory_vertices SET held_by = NULL WHERE held_by IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = inventory_vertices.held_by)"
    )
    with op.batch_alter_table(
        "inventory_vertices", schema=None, copy_from=_vertices(with_key=False)
    ) as batch_op:
        batch_op.create_foreign_key(KEY, "jobs", ["held_by"], ["id"], ondelete="SET NULL")
