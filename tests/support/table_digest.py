"""Every table at once: emptied between tests, and digested (row count and a checksum of
its rows) to prove that something stored nothing (a what-if, a dry run): two digests are
equal only when every row of every table is."""

from __future__ import annotations

import hashlib

from sqlalchemy import MetaData, delete, select

from app.db.base import Base
from app.db.engine import Database
from app.matching.gridengine.table import reset_attributes

#: Tables whose rows come from migrations (reference data); tests never empty them.
SEEDED_TABLES: frozenset[str] = frozenset({"attributes"})


def empty_tables(database: Database, metadata: MetaData = Base.metadata) -> None:
    """Every table empty but the seeded ones, which go back to their seed."""
    with database.transaction() as session:
        for table in reversed(metadata.sorted_tables):
            if table.name not in SEEDED_TABLES:
                session.execute(delete(table))
        # The attribute table is reference data that tests may change: back to the seed.
        reset_attributes(session)


def table_digest(database: Database) -> dict[str, tuple[int, str]]:
    """Per table of the models: (row count, SHA-256 of its rows in primary-key order)."""
    found: dict[str, tuple[int, str]] = {}
    with database.transaction(write=False) as session:
        for table in Base.metadata.sorted_tables:
            order = list(table.primary_key.columns) or list(table.columns)
            rows = session.execute(select(table).order_by(*order)).all()
            digest = hashlib.sha256()
            for row in rows:
                digest.update(repr(tuple(row)).encode())
                digest.update(b"\n")
            found[table.name] = (len(rows), digest.hexdigest())
    return found
