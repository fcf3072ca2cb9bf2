"""flux: worker properties and name parts, constraint leaves, resource vertices

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "category_resource_vertices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("parent_position", sa.Integer(), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=False),
        sa.Column("count", sa.Text(), nullable=False),
        sa.Column("min_count", sa.BigInteger(), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=True),
        sa.Column("exclusive", sa.Boolean(), nullable=True),
        sa.Column("unit", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_resource_vertices_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_category_resource_vertices")),
    )
    with op.batch_alter_table("category_resource_vertices", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_category_resource_vertices_category_id"), ["category_id"], unique=False
        )

    op.create_table(
        "constraint_host_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("leaf", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("lo", sa.BigInteger(), nullable=True),
        sa.Column("hi", sa.BigInteger(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("suffix", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_constraint_host_runs_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_constraint_host_runs")),
    )
    with op.batch_alter_table("constraint_host_runs", schema=None) as batch_op:
        batch_op.create_index("ix_constraint_host_runs_leaf", ["category_id", "leaf"], unique=False)

    op.create_table(
        "constraint_properties",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("leaf", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("negated", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_constraint_properties_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_constraint_properties")),
    )
    with op.batch_alter_table("constraint_properties", schema=None) as batch_op:
        batch_op.create_index(
            "ix_constraint_properties_leaf", ["category_id", "leaf"], unique=False
        )

    op.create_table(
        "constraint_rank_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("leaf", sa.Integer(), nullable=False),
        sa.Column("lo", sa.BigInteger(), nullable=False),
        sa.Column("hi", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_constraint_rank_runs_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_constraint_rank_runs")),
    )
    with op.batch_alter_table("constraint_rank_runs", schema=None) as batch_op:
        batch_op.create_index("ix_constraint_rank_runs_leaf", ["category_id", "leaf"], unique=False)

    op.create_table(
        "worker_name_parts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("number", sa.BigInteger(), nullable=False),
        sa.Column("digits_len", sa.Integer(), nullable=False),
        sa.Column("natural_len", sa.Integer(), nullable=False),
        sa.Column("suffix", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_name_parts_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_name_parts")),
    )
    with op.batch_alter_table("worker_name_parts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_worker_name_parts_lookup", ["prefix", "suffix", "number"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_worker_name_parts_worker_id"), ["worker_id"], unique=False
        )

    op.create_table(
        "worker_properties",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_properties_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", "name", name=op.f("pk_worker_properties")),
    )
    with op.batch_alter_table("categories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("constraint", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("jobspec", sa.Text(), nullable=True))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("constraint", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("constraint_syntax", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("shape", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("jobspec", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("jobspec")
        batch_op.drop_column("shape")
        batch_op.drop_column("constraint_syntax")
        batch_op.drop_column("constraint")

    with op.batch_alter_table("categories", schema=None) as batch_op:
        batch_op.drop_column("jobspec")
        batch_op.drop_column("constraint")

    op.drop_table("worker_properties")
    with op.batch_alter_table("worker_name_parts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_name_parts_worker_id"))
        batch_op.drop_index("ix_worker_name_parts_lookup")

    op.drop_table("worker_name_parts")
    with op.batch_alter_table("constraint_rank_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_constraint_rank_runs_leaf")

    op.drop_table("constraint_rank_runs")
    with op.batch_alter_table("constraint_properties", schema=None) as batch_op:
        batch_op.drop_index("ix_constraint_properties_leaf")

    op.drop_table("constraint_properties")
    with op.batch_alter_table("constraint_host_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_constraint_host_runs_leaf")

    op.drop_table("constraint_host_runs")
    with op.batch_alter_table("category_resource_vertices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_category_resource_vertices_category_id"))

    op.drop_table("category_resource_vertices")
