"""category_shapes.cores_alone: what a worker without an inventory must hold

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29

A worker without an inventory offers ``node/[core=<slots>]`` and nothing else (issue 35):
a jobspec asking for a GPU, a pool or several nodes never runs there. The column holds the
cores a category's whole job needs when it asks for nothing but cores on at most one node
(NULL otherwise), so that the misfit CASE can say so. Existing categories get their value
from their jobspec, and the cached verdicts of the pairs the new rule rules out (a
jobspec category and a worker without an inventory) are corrected here: a misfit row for
a category that lists its misfits, no fit row for one that lists its fits.
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from app.matching.allocation.vertex_requests import build_requests, cores_alone
from app.notations.flux.jobspec import validate_resources

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("category_shapes", sa.Column("cores_alone", sa.BigInteger(), nullable=True))
    if context.is_offline_mode():
        # SQL printed for a DBA: the values come from Python; existing categories keep
        # NULL there, and `jobmatch db upgrade` on the database computes them.
        return
    connection = op.get_bind()
    shapes = connection.execute(
        sa.text(
            "SELECT s.category_id, s.min_nodes, c.jobspec, c.lists_fits FROM category_shapes s "
            "JOIN categories c ON c.id = s.category_id WHERE c.jobspec IS NOT NULL"
        )
    ).all()
    if not shapes:
        return
    # Workers without an inventory, with their largest queue instance's slots.
    bare = connection.execute(
        sa.text(
            "SELECT w.id, w.generation, COALESCE((SELECT MAX(q.slots) FROM queue_instances q "
            "WHERE q.worker_id = w.id), 0) FROM workers w WHERE NOT EXISTS "
            "(SELECT 1 FROM worker_inventories i WHERE i.worker_id = w.id)"
        )
    ).all()
    for category_id, nodes, jobspec, lists_fits in shapes:
        cores = cores_alone(build_requests(validate_resources(json.loads(jobspec))))
        connection.execute(
            sa.text("UPDATE category_shapes SET cores_alone = :c WHERE category_id = :id"),
            {"c": cores, "id": category_id},
        )
        for worker_id, generation, slots in bare:
            if nodes > 1:
                reason = "needs-several-nodes"
            elif cores is None or cores > slots:
                reason = "inventory-too-small"
            else:
                continue
            pair = {"c": category_id, "w": worker_id, "g": generation, "r": reason}
            if lists_fits:
                connection.execute(
                    sa.text("DELETE FROM category_fits WHERE category_id = :c AND worker_id = :w"),
                    pair,
                )
                continue
            present = connection.execute(
                sa.text(
                    "SELECT 1 FROM category_misfits WHERE category_id = :c AND worker_id = :w "
                    "AND generation = :g"
                ),
                pair,
            ).first()
            if present is None:
                connection.execute(
                    sa.text(
                        "DELETE FROM category_misfits WHERE category_id = :c AND worker_id = :w"
                    ),
                    pair,
                )
                connection.execute(
                    sa.text(
                        "INSERT INTO category_misfits (category_id, worker_id, generation, "
                        "reason) VALUES (:c, :w, :g, :r)"
                    ),
                    pair,
                )


def downgrade() -> None:
    # Not in batch mode: SQLite (3.35 and later) drops a column without constraints itself,
    # and batch mode needs a live database to copy the table from, which
    # `jobmatch db downgrade --sql` has not.
    op.drop_column("category_shapes", "cores_alone")
