"""quota_usage.key: a "/" after the last field too, as Grid Engine writes it

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29

Grid Engine's ``rqs_get_rue_string()`` (6.2u5 and 8.1.9, source/libs/sgeobj/
sge_resource_quota.c) appends "/" after each of the five fields user/project/pe/queue/host:
``alice/////``, not ``alice////`` as jobmatch wrote it (issue 36). Usage rows written before
keep what running jobs hold, so they are renamed rather than left beside new ones: jobs
dispatched after the upgrade must count against the same row. Every key gains one "/", so
keys stay unique per limit.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("UPDATE quota_usage SET key = key || '/'")


def downgrade() -> None:
    op.execute("UPDATE quota_usage SET key = substr(key, 1, length(key) - 1)")
