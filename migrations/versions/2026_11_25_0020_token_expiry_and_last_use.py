"""api_tokens: an optional expiry and a coarse record of the last use

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE rather than a batch: adding and dropping a nullable column needs no
# table copy on either database (SQLite has had DROP COLUMN since 3.35), and a batch would
# have to reflect the table, which `jobmatch db upgrade/downgrade --sql` cannot do offline.
def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "api_tokens", sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("api_tokens", "last_used_at")
    op.drop_column("api_tokens", "expires_at")
