"""category_fits: a category whose misfits outnumber its fits lists its fits instead;
worker_tags indexed by tag

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28

A new category used to write one category_misfits row per worker that cannot run it,
which on a large farm is most of them (86% of the pairs of bench/dispatch.py). Now
app/matching/misfits.py writes whichever side is smaller: the misfits (as before, with
their reasons) or the fits (category_fits, flagged by categories.lists_fits). Existing
categories keep listing their misfits. v_category_fit reads both; for a pair the cache
does not list it says ``fits = 0`` with the reason ``not-listed`` (the API and the CLI
compute the real reason on demand). ix_worker_tags_tag lets a new category's tag clauses
find the workers naming its tags without reading every worker tag.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_VIEW_BEFORE = """
CREATE VIEW v_category_fit AS
SELECT c.id AS category_id, w.id AS worker_id, w.name AS worker_name,
       CASE WHEN m.worker_id IS NULL THEN 1 ELSE 0 END AS fits,
       m.reason AS reason
FROM categories c
CROSS JOIN workers w
LEFT JOIN category_misfits m
  ON m.category_id = c.id AND m.worker_id = w.id AND m.generation = w.generation
"""

# A misfit-listing category fits where no misfit row of the worker's generation is; a
# fit-listing one fits where a fit row of that generation is. Only one of the two joins
# can find a row for a pair, since a category lists one side.
_VIEW_AFTER = """
CREATE VIEW v_category_fit AS
SELECT c.id AS category_id, w.id AS worker_id, w.name AS worker_name,
       CASE
         WHEN c.lists_fits THEN CASE WHEN f.worker_id IS NULL THEN 0 ELSE 1 END
         WHEN m.worker_id IS NULL THEN 1
         ELSE 0
       END AS fits,
       CASE
         WHEN c.lists_fits AND f.worker_id IS NULL THEN 'not-listed'
         ELSE m.reason
       END AS reason
FROM categories c
CROSS JOIN workers w
LEFT JOIN category_misfits m
  ON m.category_id = c.id AND m.worker_id = w.id AND m.generation = w.generation
LEFT JOIN category_fits f
  ON f.category_id = c.id AND f.worker_id = w.id AND f.generation = w.generation
"""


# Plain ALTER TABLE and CREATE TABLE (no batch), so that `--sql` works offline. The table
# has no foreign keys on purpose: see CategoryFit in app/db/models/jobs.py.
def upgrade() -> None:
    op.add_column(
        "categories",
        sa.Column("lists_fits", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.create_table(
        "category_fits",
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("category_id", "worker_id", name=op.f("pk_category_fits")),
    )
    op.create_index(
        "ix_category_fits_worker",
        "category_fits",
        ["worker_id", "generation", "category_id"],
        unique=False,
    )
    op.create_index(
        "ix_worker_tags_tag",
        "worker_tags",
        ["group_name", "value", "mode", "worker_id"],
        unique=False,
    )
    op.execute("DROP VIEW v_category_fit")
    op.execute(_VIEW_AFTER)


def downgrade() -> None:
    # The older code reads only misfit rows: a fit-listing category gets a misfit row for
    # every worker it does not list, so what fits stays exact (its reasons become
    # ``not-listed``, which the older code shows as a code without words).
    op.execute(
        """
        INSERT INTO category_misfits (category_id, worker_id, generation, reason)
        SELECT c.id, w.id, w.generation, 'not-listed'
        FROM categories c CROSS JOIN workers w
        WHERE c.lists_fits AND NOT EXISTS (
            SELECT 1 FROM category_fits f
            WHERE f.category_id = c.id AND f.worker_id = w.id AND f.generation = w.generation
        )
        """
    )
    op.execute("DROP VIEW v_category_fit")
    op.execute(_VIEW_BEFORE)
    op.drop_index("ix_worker_tags_tag", table_name="worker_tags")
    op.drop_index("ix_category_fits_worker", table_name="category_fits")
    op.drop_table("category_fits")
    op.drop_column("categories", "lists_fits")
