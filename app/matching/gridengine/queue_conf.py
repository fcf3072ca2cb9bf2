"""Cluster queue configuration that Grid Engine keeps in queue_conf(5) and jobmatch
models: ``seq_no`` and ``load_thresholds`` (``qconf -mattr queue load_thresholds ...``),
their per-host values (``seq_no 0,[h2=1]``: a queue instance's own value, NULL for the
cluster queue's), and a queue instance's states (``qmod -d``/``-e``, ``-s``/``-us``;
app/matching/gridengine/queue_states.py). A queue exists once a worker offers an
instance of it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.orm import Session

from app.db.models import Queue, QueueInstance, Worker
from app.matching import announce
from app.matching.errors import InvalidFieldError, NotFoundError
from app.matching.gridengine.table import load_table
from app.matching.misfits import recache_worker_misfits
from app.notations.errors import NotationError
from app.notations.gridengine.load_thresholds import parse_load_thresholds


def any_queue_conf(session: Session) -> bool:
    """Whether some queue or queue instance has thresholds, or some instance is disabled
    or suspended (then any job may meet an instance the scheduler drops)."""
    queues = exists().where(Queue.load_thresholds != "NONE")
    instances = exists().where(
        or_(
            and_(
                QueueInstance.load_thresholds.is_not(None),
                QueueInstance.load_thresholds != "NONE",
            ),
            QueueInstance.states != "",
        )
    )
    return bool(session.scalar(select(or_(queues, instances))))


def get_queue(session: Session, name: str) -> Queue:
    queue = session.scalar(select(Queue).where(Queue.name == name))
    if queue is None:
        raise NotFoundError(f"queue {name!r} not found (a worker offering it creates it)")
    return queue


def _thresholds_text(session: Session, text: str) -> str:
    """``text`` in queue_conf's stored form, checked against the attribute table."""
    try:
        thresholds = parse_load_thresholds(text, load_table(session))
    except NotationError as error:
        raise InvalidFieldError("load_thresholds", error.message, error) from error
    return thresholds.text()


def set_load_thresholds(session: Session, name: str, text: str) -> Queue:
    """Store the queue's thresholds in queue_conf's form (``NONE`` for none), checked
    against the attribute table. Lowering or removing one may end an alarm: waiting
    pulls are woken to look again."""
    queue = get_queue(session, name)
    queue.load_thresholds = _thresholds_text(session, text)
    session.flush()
    announce.everything_changed(session)
    return queue


def set_seq_no(session: Session, name: str, seq_no: int) -> Queue:
    """Set the cluster queue's seq_no (the instances without their own take it)."""
    queue = get_queue(session, name)
    queue.seq_no = seq_no
    session.flush()
    announce.everything_changed(session)
    return queue


def get_instance(session: Session, queue: str, host: str) -> QueueInstance:
    """The instance ``queue@host``; NotFoundError when the host offers no such queue."""
    instance = session.scalar(
        select(QueueInstance)
        .join(Queue, Queue.id == QueueInstance.queue_id)
        .join(Worker, Worker.id == QueueInstance.worker_id)
        .where(Queue.name == queue, Worker.name == host)
    )
    if instance is None:
        raise NotFoundError(
            f"queue instance {queue}@{host} not found (worker {host!r} offers no {queue!r})"
        )
    return instance


class Unset:
    """A field a change leaves as it is."""


UNSET = Unset()


@dataclass(frozen=True)
class InstanceChanges:
    """What a change sets of a queue instance; :data:`UNSET` leaves a field as it is, None
    clears a per-host value (the cluster queue's applies again)."""

    disabled: bool | Unset = UNSET
    suspended: bool | Unset = UNSET
    seq_no: int | Unset | None = UNSET
    load_thresholds: str | Unset | None = UNSET


def change_instance(
    session: Session, queue: str, host: str, changes: InstanceChanges
) -> QueueInstance:
    """Apply ``changes`` to ``queue@host`` (``qmod -d``/``-e``/``-s``/``-us``, ``qconf
    -mattr queue seq_no 1 queue@host``). A change of state changes which workers can take
    which categories: the worker gets a new generation and misfit rows. Everything is
    checked before anything is stored."""
    instance = get_instance(session, queue, host)
    thresholds = changes.load_thresholds
    if isinstance(thresholds, str):
        thresholds = _thresholds_text(session, thresholds)
    before = instance.states
    instance.set_states(
        disabled=instance.disabled if isinstance(changes.disabled, Unset) else changes.disabled,
        suspended=(
            instance.suspended if isinstance(changes.suspended, Unset) else changes.suspended
        ),
    )
    states_changed = instance.states != before
    if not isinstance(changes.seq_no, Unset):
        instance.seq_no = changes.seq_no
    if not isinstance(thresholds, Unset):
        instance.load_thresholds = thresholds
    session.flush()
    if states_changed:
        worker = session.get(Worker, instance.worker_id)
        assert worker is not None
        worker.generation += 1
        session.flush()
        recache_worker_misfits(session, worker.id)
    announce.workers_changed(session, [instance.worker_id])
    return instance
