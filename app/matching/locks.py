"""Row locks and the order writers take them in, and the one lookup of a worker by name.

Writers lock in one order, so that no two transactions wait for each other: the worker
row first (a pull, a finish, a heartbeat, a metadata report or a definition change),
then jobs, then queue instances, then consumable rows in id order (the Grid Engine
bookings); app/matching/dispatch/pull.py describes the whole pull.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.db.models import Worker
from app.matching.named_rows import row_by_name


def worker_by_name(session: Session, name: str, *, lock: bool = False) -> Worker:
    """The worker named ``name`` (its row locked FOR UPDATE when ``lock``, the first lock
    a writer takes); NotFoundError when there is none."""
    return row_by_name(session, Worker, name, missing=f"no worker named {name!r}", lock=lock)
