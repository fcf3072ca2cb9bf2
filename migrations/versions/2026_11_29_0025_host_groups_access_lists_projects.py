"""host_groups, access_lists, projects and jobs.project: Grid Engine host groups (with
nesting), user access lists and projects for queue lists and resource quota filters, and a
job's ``qsub -P`` project

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _named(table: str, length: int) -> None:
    op.create_table(
        table,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=length), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
        sa.UniqueConstraint("name", name=op.f(f"uq_{table}_name")),
    )


def _members(table: str, owner: str, owner_column: str, length: int) -> None:
    op.create_table(
        table,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(owner_column, sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("member", sa.String(length=length), nullable=False),
        sa.ForeignKeyConstraint(
            [owner_column],
            [f"{owner}.id"],
            name=op.f(f"fk_{table}_{owner_column}_{owner}"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
        sa.UniqueConstraint(owner_column, "member", name=op.f(f"uq_{table}_{owner_column}_member")),
    )


def upgrade() -> None:
    _named("host_groups", 256)
    _members("host_group_members", "host_groups", "group_id", 256)
    _named("access_lists", 255)
    _members("access_list_members", "access_lists", "list_id", 255)
    _named("projects", 255)
    op.add_column("jobs", sa.Column("project", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("project")
    op.drop_table("projects")
    op.drop_table("access_list_members")
    op.drop_table("access_lists")
    op.drop_table("host_group_members")
    op.drop_table("host_groups")
