"""What writers announce to long-polling pulls, in the words of app/matching/wakeups.py.

Each call only records the announcement on the session; it leaves when the transaction
commits (app/db/notify.py), so a woken pull sees what woke it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import String, cast, literal
from sqlalchemy.orm import Session

from app.db import notify
from app.matching.wakeups import (
    EVERYTHING,
    JOB_MARK,
    job_taken,
    job_waiting,
    room_changed,
    worker_changed,
)


def job_waits(session: Session, category_id: int, job_id: int | None = None) -> None:
    """A job of the category waits (submitted, returned or requeued): the job, when one
    is named, or some jobs of it (a bulk submission, tasks an array held back)."""
    notify.announce(session, job_waiting(category_id, job_id))


def job_taken_by_pull(session: Session, category_id: int, job_id: int) -> None:
    """A pull took the job, of the category: the relays of every process count it off, so
    that they wake no more waiters for it, and a renewal that stands on an attempt made
    before it was announced need not look for it (app/matching/wakeups.py)."""
    notify.announce(session, job_taken(category_id, job_id))


def job_token_column(prefix: str, category_id: Any, job_id: Any) -> Any:
    """The token naming a job (``prefix`` :data:`~app.matching.wakeups.WAITING` or
    :data:`~app.matching.wakeups.TAKEN`: ``c12.345``, ``t12.345``) as SQL over the
    statement's own columns, for a statement that announces by itself
    (``notify.notify_column``): :func:`job_waiting` and :func:`job_taken`, written once for
    the database."""
    return (
        literal(prefix, String)
        + cast(category_id, String)
        + literal(JOB_MARK, String)
        + cast(job_id, String)
    )


def workers_changed(session: Session, worker_ids: Iterable[int | None]) -> None:
    """These workers changed: their description, metadata or values."""
    notify.announce(session, *(worker_changed(w) for w in worker_ids if w is not None))


def rooms_changed(session: Session, worker_ids: Iterable[int | None]) -> None:
    """These workers' room changed: a job ended or went back and freed it, or the
    scheduler placed a job on them."""
    notify.announce(session, *(room_changed(w) for w in worker_ids if w is not None))


def everything_changed(session: Session) -> None:
    """Something every worker's fit may depend on changed (global values, the attribute
    table, tasks, parallel environments): every waiter looks again."""
    notify.announce(session, EVERYTHING)


@contextmanager
def withheld(session: Session) -> Iterator[None]:
    """Announcements made in the block are dropped when it ends: what it did was rolled
    back (a what-if's savepoint, app/matching/whatif/), so no waiter should look again.
    Those made before the block are kept."""
    kept = {
        key: set(session.info[key])
        for key in (notify.PENDING_KEY, notify.SENT_KEY)
        if key in session.info
    }
    try:
        yield
    finally:
        for key in (notify.PENDING_KEY, notify.SENT_KEY):
            if key in kept:
                session.info[key] = kept[key]
            else:
                session.info.pop(key, None)
