"""debusine tasks: task registry, worker metadata rows and namespaces, job task/command

Revision ID: 0005
Revises: 0008
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Each worker's metadata as people read it: one row per key and side, list elements left
#: out; ``effective`` = 0 marks a dynamic value the static side overrides.
VIEW = """
    CREATE VIEW v_worker_metadata AS
    SELECT w.name AS worker_name, m.key, m.source, m.value_json, m.value_type, m.effective,
           m.reported_at
    FROM worker_metadata m JOIN workers w ON w.id = m.worker_id
    WHERE m.element IS NULL
"""


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("requirements", sa.Text(), nullable=True),
        sa.Column("plugin", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("version >= 1", name=op.f("ck_tasks_version_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("name", name=op.f("uq_tasks_name")),
    )
    op.create_table(
        "worker_metadata",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("element", sa.Integer(), nullable=True),
        sa.Column("value_type", sa.String(length=8), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column("value_number", sa.Float(precision=53), nullable=True),
        sa.Column("value_text", sa.Text(), nullable=True),
        sa.Column("value_bool", sa.Boolean(), nullable=True),
        sa.Column("effective", sa.Boolean(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "source IN ('static', 'dynamic')", name=op.f("ck_worker_metadata_source_known")
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_metadata_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_metadata")),
    )
    with op.batch_alter_table("worker_metadata", schema=None) as batch_op:
        batch_op.create_index(
            "ix_worker_metadata_lookup", ["worker_id", "key", "element"], unique=False
        )

    op.create_table(
        "worker_metadata_namespaces",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "version >= 1", name=op.f("ck_worker_metadata_namespaces_version_positive")
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_metadata_namespaces_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "worker_id", "namespace", name=op.f("pk_worker_metadata_namespaces")
        ),
    )
    op.create_table(
        "category_tasks",
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_tasks_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_category_tasks_task_id_tasks"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("category_id", name=op.f("pk_category_tasks")),
    )
    op.create_index(op.f("ix_category_tasks_task_id"), "category_tasks", ["task_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("task", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("timeout", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("output", sa.Text(), nullable=True))

    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("metadata_reported_at", sa.DateTime(timezone=True), nullable=True)
        )

    op.execute(VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS v_worker_metadata")
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("metadata_reported_at")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("output")
        batch_op.drop_column("exit_code")
        batch_op.drop_column("timeout")
        batch_op.drop_column("command")
        batch_op.drop_column("task")

    op.drop_index(op.f("ix_category_tasks_task_id"), table_name="category_tasks")
    op.drop_table("category_tasks")
    op.drop_table("worker_metadata_namespaces")
    with op.batch_alter_table("worker_metadata", schema=None) as batch_op:
        batch_op.drop_index("ix_worker_metadata_lookup")

    op.drop_table("worker_metadata")
    op.drop_table("tasks")
