"""Cluster queue configuration that Grid Engine keeps in queue_conf(5) and jobmatch
models: ``load_thresholds`` (``qconf -mattr queue load_thresholds ...``). A queue exists
once a worker offers an instance of it."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from app.db.models import Queue
from app.matching import announce
from app.matching.errors import InvalidFieldError, NotFoundError
from app.matching.gridengine.table import load_table
from app.notations.errors import NotationError
from app.notations.gridengine.load_thresholds import parse_load_thresholds


def any_load_thresholds(session: Session) -> bool:
    """Whether some queue has thresholds (then any job may meet an instance in alarm)."""
    return bool(session.scalar(select(exists().where(Queue.load_thresholds != "NONE"))))


def get_queue(session: Session, name: str) -> Queue:
    queue = session.scalar(select(Queue).where(Queue.name == name))
    if queue is None:
        raise NotFoundError(f"queue {name!r} not found (a worker offering it creates it)")
    return queue


def set_load_thresholds(session: Session, name: str, text: str) -> Queue:
    """Store the queue's thresholds in queue_conf's form (``NONE`` for none), checked
    against the attribute table. Lowering or removing one may end an alarm: waiting
    pulls are woken to look again."""
    queue = get_queue(session, name)
    try:
        thresholds = parse_load_thresholds(text, load_table(session))
    except NotationError as error:
        raise InvalidFieldError("load_thresholds", error.message, error) from error
    queue.load_thresholds = thresholds.text()
    session.flush()
    announce.everything_changed(session)
    return queue
