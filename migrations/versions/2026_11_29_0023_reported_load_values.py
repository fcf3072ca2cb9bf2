"""attribute_values.source: what an administrator set apart from what a worker reported

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29

A worker's load report (PUT /v1/workers/{name}/load, sent by the agent) replaced every load
value of its host, those an administrator had set through PUT /v1/values/hosts/{host} too
(issue 35: the README's ``arch=lx-amd64`` on w1 was gone after the agent's first report,
and the MPI job's category fitted no worker). A row now says who wrote it, ``admin`` or
``report``, each writer replaces only its own rows, and one attribute may have both at one
object; the unique key takes the source.

Existing load rows are taken for reports: nothing tells who wrote them, and a row taken for
an administrator's would hide every later report of its attribute, where a reported one is
only replaced by the next report (an administrator sets again what should stay). Fixed and
built-in values are configuration. A downgrade keeps one row per key, the administrator's.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_KEY = "uq_attribute_values_attribute_id_level_object_key_kind"
_NEW_KEY = "uq_attribute_values_attribute_id_level_object_key_kind_source"
_SOURCE_KNOWN = "ck_attribute_values_source_known"
_ONLY_LOADS = "ck_attribute_values_only_loads_reported"

# A row's object matches its level (app/db/models/gridengine.py), as 0004 wrote it.
_OBJECT_CHECK = (
    "(level = 'global' AND worker_id IS NULL AND queue_instance_id IS NULL AND object_key = 0)"
    " OR (level = 'host' AND worker_id IS NOT NULL AND queue_instance_id IS NULL"
    " AND object_key = worker_id)"
    " OR (level = 'queue_instance' AND worker_id IS NOT NULL AND queue_instance_id IS NOT NULL"
    " AND object_key = queue_instance_id)"
)


def _values(with_source: bool) -> sa.Table:
    """attribute_values as 0004 made it (``with_source``: as this revision leaves it):
    SQLite's batch mode copies the table from this definition instead of reflecting it,
    so that the offline SQL (``jobmatch db upgrade --sql``) can be printed too."""
    key = ["attribute_id", "level", "object_key", "kind"]
    extra: list[sa.SchemaItem] = []
    if with_source:
        extra = [
            sa.Column("source", sa.String(length=8), server_default="admin", nullable=False),
            sa.CheckConstraint("source IN ('admin', 'report')", name=_SOURCE_KNOWN),
            sa.CheckConstraint("source = 'admin' OR kind = 'load'", name=_ONLY_LOADS),
            sa.UniqueConstraint(*key, "source", name=_NEW_KEY),
        ]
    else:
        extra = [sa.UniqueConstraint(*key, name=_OLD_KEY)]
    return sa.Table(
        "attribute_values",
        sa.MetaData(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attribute_id", sa.Integer(), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("object_key", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("queue_instance_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("number", sa.Float(), nullable=True),
        sa.Column("string", sa.Text(), nullable=True),
        sa.Column("effective", sa.Boolean(), nullable=False),
        sa.CheckConstraint(_OBJECT_CHECK, name="ck_attribute_values_object_matches_level"),
        sa.CheckConstraint(
            "kind IN ('fixed', 'load', 'builtin')", name="ck_attribute_values_kind_known"
        ),
        sa.CheckConstraint(
            "level IN ('global', 'host', 'queue_instance')",
            name="ck_attribute_values_level_known",
        ),
        sa.ForeignKeyConstraint(
            ["attribute_id"],
            ["attributes.id"],
            name="fk_attribute_values_attribute_id_attributes",
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["queue_instance_id"],
            ["queue_instances.id"],
            name="fk_attribute_values_queue_instance_id_queue_instances",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name="fk_attribute_values_worker_id_workers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_attribute_values"),
        sa.Index("ix_attribute_values_object", "level", "object_key", "attribute_id"),
        sa.Index("ix_attribute_values_queue_instance_id", "queue_instance_id"),
        sa.Index("ix_attribute_values_worker", "worker_id"),
        *extra,
    )


def upgrade() -> None:
    with op.batch_alter_table(
        "attribute_values", schema=None, copy_from=_values(with_source=False)
    ) as batch_op:
        batch_op.add_column(
            sa.Column("source", sa.String(length=8), server_default="admin", nullable=False)
        )
        batch_op.drop_constraint(op.f(_OLD_KEY), type_="unique")
        batch_op.create_unique_constraint(
            op.f(_NEW_KEY), ["attribute_id", "level", "object_key", "kind", "source"]
        )
        batch_op.create_check_constraint(op.f(_SOURCE_KNOWN), "source IN ('admin', 'report')")
        batch_op.create_check_constraint(op.f(_ONLY_LOADS), "source = 'admin' OR kind = 'load'")
    op.execute("UPDATE attribute_values SET source = 'report' WHERE kind = 'load'")


def downgrade() -> None:
    # The old key holds one row per kind: a report an administrator's value hides goes.
    op.execute(
        "DELETE FROM attribute_values WHERE source = 'report' AND EXISTS ("
        "SELECT 1 FROM attribute_values AS admin WHERE admin.source = 'admin'"
        " AND admin.kind = attribute_values.kind"
        " AND admin.attribute_id = attribute_values.attribute_id"
        " AND admin.level = attribute_values.level"
        " AND admin.object_key = attribute_values.object_key)"
    )
    with op.batch_alter_table(
        "attribute_values", schema=None, copy_from=_values(with_source=True)
    ) as batch_op:
        batch_op.drop_constraint(op.f(_ONLY_LOADS), type_="check")
        batch_op.drop_constraint(op.f(_SOURCE_KNOWN), type_="check")
        batch_op.drop_constraint(op.f(_NEW_KEY), type_="unique")
        batch_op.create_unique_constraint(
            op.f(_OLD_KEY), ["attribute_id", "level", "object_key", "kind"]
        )
        batch_op.drop_column("source")
