"""resource inventories: vertices, free counts, bookings, category node needs

Revision ID: 0006
Revises: 0004
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


#: Free units per worker and (type, unit), as an aggregate over the vertex rows: what
#: inventory_counts caches for the dispatch queries (the tests hold the two equal).
FREE_VIEW = """
    CREATE VIEW v_inventory_free AS
    SELECT v.worker_id, w.name AS worker_name, v.type, COALESCE(v.unit, '') AS unit,
           SUM(CASE WHEN v.unit IS NULL THEN 1 ELSE v.size END) AS total,
           SUM(CASE WHEN v.held_by IS NOT NULL THEN 0
                    WHEN v.unit IS NULL THEN 1 ELSE v.size - v.used END) AS free
    FROM inventory_vertices v JOIN workers w ON w.id = v.worker_id
    GROUP BY v.worker_id, w.name, v.type, COALESCE(v.unit, '')
"""


def upgrade() -> None:
    op.create_table(
        "category_node_needs",
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=False),
        sa.Column("unit", sa.String(length=64), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_node_needs_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("category_id", "type", "unit", name=op.f("pk_category_node_needs")),
    )
    op.create_table(
        "category_shapes",
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("min_nodes", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_shapes_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("category_id", name=op.f("pk_category_shapes")),
    )
    op.create_table(
        "inventory_counts",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=False),
        sa.Column("unit", sa.String(length=64), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("free", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "free >= 0 AND free <= total", name=op.f("ck_inventory_counts_free_within_total")
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_inventory_counts_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", "type", "unit", name=op.f("pk_inventory_counts")),
    )
    with op.batch_alter_table("inventory_counts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_inventory_counts_lookup", ["type", "unit", "worker_id", "free"], unique=False
        )

    op.create_table(
        "worker_inventories",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("inventory", sa.Text(), nullable=False),
        sa.Column("syntax", sa.String(length=16), nullable=False),
        sa.Column("upper", sa.Text(), nullable=False),
        sa.Column("vertices", sa.Integer(), nullable=False),
        sa.Column("untouched", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_inventories_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_worker_inventories")),
    )
    op.create_table(
        "inventory_vertices",
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
            "held_by IS NULL OR (shared = 0 AND used = 0)",
            name=op.f("ck_inventory_vertices_held_alone"),
        ),
        sa.CheckConstraint("shared >= 0", name=op.f("ck_inventory_vertices_shared_not_negative")),
        sa.CheckConstraint(
            "used >= 0 AND used <= size", name=op.f("ck_inventory_vertices_used_within_size")
        ),
        sa.ForeignKeyConstraint(
            ["held_by"],
            ["jobs.id"],
            name=op.f("fk_inventory_vertices_held_by_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_inventory_vertices_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inventory_vertices")),
    )
    with op.batch_alter_table("inventory_vertices", schema=None) as batch_op:
        batch_op.create_index(
            "ix_inventory_vertices_worker_position", ["worker_id", "position"], unique=True
        )

    op.create_table(
        "inventory_bookings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("vertex_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("booked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("amount >= 1", name=op.f("ck_inventory_bookings_amount_positive")),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_inventory_bookings_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["vertex_id"],
            ["inventory_vertices.id"],
            name=op.f("fk_inventory_bookings_vertex_id_inventory_vertices"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_inventory_bookings_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inventory_bookings")),
    )
    with op.batch_alter_table("inventory_bookings", schema=None) as batch_op:
        batch_op.create_index(
            "ix_inventory_bookings_exclusive",
            ["vertex_id"],
            unique=True,
            sqlite_where=sa.text("mode = 'exclusive' AND released_at IS NULL"),
            postgresql_where=sa.text("mode = 'exclusive' AND released_at IS NULL"),
        )
        batch_op.create_index("ix_inventory_bookings_job", ["job_id"], unique=False)
    op.execute(FREE_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW v_inventory_free")
    with op.batch_alter_table("inventory_bookings", schema=None) as batch_op:
        batch_op.drop_index("ix_inventory_bookings_job")
        batch_op.drop_index(
            "ix_inventory_bookings_exclusive",
            sqlite_where=sa.text("mode = 'exclusive' AND released_at IS NULL"),
            postgresql_where=sa.text("mode = 'exclusive' AND released_at IS NULL"),
        )

    op.drop_table("inventory_bookings")
    with op.batch_alter_table("inventory_vertices", schema=None) as batch_op:
        batch_op.drop_index("ix_inventory_vertices_worker_position")

    op.drop_table("inventory_vertices")
    op.drop_table("worker_inventories")
    with op.batch_alter_table("inventory_counts", schema=None) as batch_op:
        batch_op.drop_index("ix_inventory_counts_lookup")

    op.drop_table("inventory_counts")
    op.drop_table("category_shapes")
    op.drop_table("category_node_needs")
