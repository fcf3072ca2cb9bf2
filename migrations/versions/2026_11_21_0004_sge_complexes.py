"""sge: complex attributes (seeded with the 6.2u5 default table), values per level,
consumable usage and bookings, parallel environments, category requests

Revision ID: 0004
Revises: 0005
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.quantities import ValueType, parse_number

# A row's object matches its level (app/db/models/gridengine.py).
_OBJECT_CHECK = (
    "(level = 'global' AND worker_id IS NULL AND queue_instance_id IS NULL AND object_key = 0)"
    " OR (level = 'host' AND worker_id IS NOT NULL AND queue_instance_id IS NULL"
    " AND object_key = worker_id)"
    " OR (level = 'queue_instance' AND worker_id IS NOT NULL AND queue_instance_id IS NOT NULL"
    " AND object_key = queue_instance_id)"
)

revision: str = "0004"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "attributes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("shortcut", sa.String(length=255), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("relop", sa.String(length=8), nullable=False),
        sa.Column("requestable", sa.String(length=8), nullable=False),
        sa.Column("consumable", sa.String(length=8), nullable=False),
        sa.Column("default", sa.Text(), nullable=False),
        sa.Column("default_number", sa.Float(), nullable=True),
        sa.Column("urgency", sa.Float(), nullable=False),
        sa.Column("builtin", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attributes")),
        sa.UniqueConstraint("name", name=op.f("uq_attributes_name")),
        sa.UniqueConstraint("shortcut", name=op.f("uq_attributes_shortcut")),
    )
    op.create_table(
        "parallel_environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("allocation_rule", sa.String(length=32), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.CheckConstraint("slots >= 0", name=op.f("ck_parallel_environments_slots_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_parallel_environments")),
        sa.UniqueConstraint("name", name=op.f("uq_parallel_environments_name")),
    )
    op.create_table(
        "category_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("attribute_id", sa.Integer(), nullable=False),
        sa.Column("soft", sa.Boolean(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("number", sa.Float(), nullable=True),
        sa.Column("regex", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["attribute_id"],
            ["attributes.id"],
            name=op.f("fk_category_requests_attribute_id_attributes"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_requests_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_category_requests")),
        sa.UniqueConstraint(
            "category_id",
            "attribute_id",
            "soft",
            name=op.f("uq_category_requests_category_id_attribute_id_soft"),
        ),
    )
    with op.batch_alter_table("category_requests", schema=None) as batch_op:
        batch_op.create_index(
            "ix_category_requests_attribute", ["attribute_id", "soft"], unique=False
        )

    op.create_table(
        "attribute_values",
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
        sa.CheckConstraint(
            _OBJECT_CHECK,
            name=op.f("ck_attribute_values_object_matches_level"),
        ),
        sa.CheckConstraint(
            "kind IN ('fixed', 'load', 'builtin')", name=op.f("ck_attribute_values_kind_known")
        ),
        sa.CheckConstraint(
            "level IN ('global', 'host', 'queue_instance')",
            name=op.f("ck_attribute_values_level_known"),
        ),
        sa.ForeignKeyConstraint(
            ["attribute_id"],
            ["attributes.id"],
            name=op.f("fk_attribute_values_attribute_id_attributes"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["queue_instance_id"],
            ["queue_instances.id"],
            name=op.f("fk_attribute_values_queue_instance_id_queue_instances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_attribute_values_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attribute_values")),
        sa.UniqueConstraint(
            "attribute_id",
            "level",
            "object_key",
            "kind",
            name=op.f("uq_attribute_values_attribute_id_level_object_key_kind"),
        ),
    )
    with op.batch_alter_table("attribute_values", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attribute_values_object", ["level", "object_key", "attribute_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_attribute_values_queue_instance_id"), ["queue_instance_id"], unique=False
        )
        batch_op.create_index("ix_attribute_values_worker", ["worker_id"], unique=False)

    op.create_table(
        "consumable_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attribute_id", sa.Integer(), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("object_key", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("queue_instance_id", sa.Integer(), nullable=True),
        sa.Column("capacity", sa.Float(), nullable=False),
        sa.Column("used", sa.Float(), nullable=False),
        sa.Column("used_nonexclusive", sa.Float(), nullable=False),
        sa.CheckConstraint(
            _OBJECT_CHECK,
            name=op.f("ck_consumable_usage_object_matches_level"),
        ),
        sa.CheckConstraint(
            "level IN ('global', 'host', 'queue_instance')",
            name=op.f("ck_consumable_usage_level_known"),
        ),
        sa.CheckConstraint("capacity >= 0", name=op.f("ck_consumable_usage_capacity_not_negative")),
        sa.CheckConstraint(
            "used >= 0 AND used <= capacity", name=op.f("ck_consumable_usage_used_within_capacity")
        ),
        sa.CheckConstraint(
            "used_nonexclusive >= 0", name=op.f("ck_consumable_usage_nonexclusive_not_negative")
        ),
        sa.ForeignKeyConstraint(
            ["attribute_id"],
            ["attributes.id"],
            name=op.f("fk_consumable_usage_attribute_id_attributes"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["queue_instance_id"],
            ["queue_instances.id"],
            name=op.f("fk_consumable_usage_queue_instance_id_queue_instances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_consumable_usage_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_consumable_usage")),
        sa.UniqueConstraint(
            "attribute_id",
            "level",
            "object_key",
            name=op.f("uq_consumable_usage_attribute_id_level_object_key"),
        ),
    )
    with op.batch_alter_table("consumable_usage", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_consumable_usage_queue_instance_id"), ["queue_instance_id"], unique=False
        )
        batch_op.create_index("ix_consumable_usage_worker", ["worker_id"], unique=False)

    op.create_table(
        "job_bookings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("usage_id", sa.Integer(), nullable=False),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.Column("nonexclusive", sa.Boolean(), nullable=False),
        sa.CheckConstraint("amount >= 0", name=op.f("ck_job_bookings_amount_not_negative")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_bookings_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["usage_id"],
            ["consumable_usage.id"],
            name=op.f("fk_job_bookings_usage_id_consumable_usage"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_bookings")),
    )
    with op.batch_alter_table("job_bookings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_bookings_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_job_bookings_usage_id"), ["usage_id"], unique=False)

    with op.batch_alter_table("categories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("hard", sa.Text(), server_default="NONE", nullable=False))
        batch_op.add_column(sa.Column("soft", sa.Text(), server_default="NONE", nullable=False))
        batch_op.add_column(sa.Column("pe", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("pe_min", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("pe_max", sa.Integer(), server_default="1", nullable=False))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("hard", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("soft", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("pe", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("pe_slots", sa.String(length=64), nullable=True))

    _seed_default_table()


def _seed_default_table() -> None:
    """The 51 built-in attributes of Grid Engine 6.2u5 (complex(5))."""
    attributes = sa.table(
        "attributes",
        sa.column("name", sa.String),
        sa.column("shortcut", sa.String),
        sa.column("type", sa.String),
        sa.column("relop", sa.String),
        sa.column("requestable", sa.String),
        sa.column("consumable", sa.String),
        sa.column("default", sa.Text),
        sa.column("default_number", sa.Float),
        sa.column("urgency", sa.Float),
        sa.column("builtin", sa.Boolean),
    )
    rows = []
    for row in DEFAULT_COMPLEX_ROWS:
        value_type = ValueType.parse(str(row["type"]))
        default = str(row["default"])
        rows.append(
            {
                "name": row["name"],
                "shortcut": row["shortcut"],
                "type": value_type.value,
                "relop": row["relop"],
                "requestable": row["requestable"],
                "consumable": row["consumable"],
                "default": default,
                "default_number": parse_number(default, value_type)
                if value_type.is_numeric
                else None,
                "urgency": float(row["urgency"]),
                "builtin": True,
            }
        )
    op.bulk_insert(attributes, rows)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("pe_slots")
        batch_op.drop_column("pe")
        batch_op.drop_column("soft")
        batch_op.drop_column("hard")

    with op.batch_alter_table("categories", schema=None) as batch_op:
        batch_op.drop_column("pe_max")
        batch_op.drop_column("pe_min")
        batch_op.drop_column("pe")
        batch_op.drop_column("soft")
        batch_op.drop_column("hard")

    with op.batch_alter_table("job_bookings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_bookings_usage_id"))
        batch_op.drop_index(batch_op.f("ix_job_bookings_job_id"))

    op.drop_table("job_bookings")
    with op.batch_alter_table("consumable_usage", schema=None) as batch_op:
        batch_op.drop_index("ix_consumable_usage_worker")
        batch_op.drop_index(batch_op.f("ix_consumable_usage_queue_instance_id"))

    op.drop_table("consumable_usage")
    with op.batch_alter_table("attribute_values", schema=None) as batch_op:
        batch_op.drop_index("ix_attribute_values_worker")
        batch_op.drop_index(batch_op.f("ix_attribute_values_queue_instance_id"))
        batch_op.drop_index("ix_attribute_values_object")

    op.drop_table("attribute_values")
    with op.batch_alter_table("category_requests", schema=None) as batch_op:
        batch_op.drop_index("ix_category_requests_attribute")

    op.drop_table("category_requests")
    op.drop_table("parallel_environments")
    op.drop_table("attributes")
