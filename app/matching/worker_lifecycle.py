"""A worker's life after registration: changing some of its fields (drain, disable, resume,
new slots or resources) without restating the rest, and removing it.

``POST /v1/workers?replace=true`` replaces a whole worker (app/matching/workers.py
``upsert_worker``); the changes here start from what is stored and go through the same
function, so that they are validated, recached and generation-bumped exactly as a
registration is.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import delete, exists, or_, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    Allocation,
    ApiToken,
    CategoryFit,
    InventoryBooking,
    Job,
    JobEventKind,
    JobState,
    QueueInstance,
    Role,
    Worker,
    WorkerInventory,
    WorkerProperty,
    WorkerState,
)
from app.db.revocations import announce_revocation
from app.matching import announce, domain_events
from app.matching.dispatch.pull import (
    booked_workers,
    lock_workers,
    release_allocations,
    wait_again,
)
from app.matching.errors import ConflictError, InvalidFieldError, WorkerExistsError
from app.matching.locks import worker_by_name
from app.matching.workers import DEFAULT_QUEUE, WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec
from app.words import noun

T = TypeVar("T")


class Unset(enum.Enum):
    """The marker of a field a change leaves as it is (``None`` may be a value: no rank)."""

    UNSET = "unset"


UNSET = Unset.UNSET


@dataclass(frozen=True)
class WorkerChanges:
    """The fields a PATCH gives; every field left :data:`UNSET` keeps its stored value."""

    state: WorkerState | Unset = UNSET
    #: Why the state is what it is (free text); a change of state without one clears it.
    reason: str | Unset | None = UNSET
    resources: str | Unset = UNSET
    slots: int | Unset = UNSET
    rank: int | Unset | None = UNSET
    queues: tuple[QueueSpec, ...] | Unset = UNSET
    properties: tuple[str, ...] | Unset = UNSET
    inventory: str | list[Any] | Unset | None = UNSET


def _stored_inventory(session: Session, worker: Worker) -> str | list[Any] | None:
    """The inventory as it was given: an RFC 14 list was stored as its JSON text (a shape
    never starts with ``[``), so that list is given back and compares equal."""
    row = session.get(WorkerInventory, worker.id)
    if row is None:
        return None
    if row.inventory.startswith("["):
        loaded: list[Any] = json.loads(row.inventory)
        return loaded
    return row.inventory


def stored_spec(session: Session, worker: Worker) -> WorkerSpec:
    """The worker as a registration would state it now."""
    queues = tuple(QueueSpec(qi.queue.name, qi.slots) for qi in worker.queue_instances)
    properties = session.scalars(
        select(WorkerProperty.name)
        .where(WorkerProperty.worker_id == worker.id)
        .order_by(WorkerProperty.name)
    )
    return WorkerSpec(
        name=worker.name,
        resources=worker.resources,
        slots=queues[0].slots if len(queues) == 1 else 1,
        rank=worker.rank,
        state=worker.state,
        queues=queues,
        properties=tuple(properties),
        inventory=_stored_inventory(session, worker),
    )


def _queues_for_slots(current: WorkerSpec, slots: int) -> tuple[QueueSpec, ...]:
    """``slots`` sizes the one default queue instance; a worker with other queues is
    changed through ``queues``, which says which queue gets how many."""
    if any(queue.name != DEFAULT_QUEUE for queue in current.queues):
        names = ", ".join(queue.name for queue in current.queues)
        raise InvalidFieldError(
            "slots",
            f"the worker has the queues {names}; give `queues` with the slots of each instead",
        )
    return (QueueSpec(DEFAULT_QUEUE, slots),)


def _given(value: T | Unset, current: T) -> T:
    return current if isinstance(value, Unset) else value


def _merged(current: WorkerSpec, changes: WorkerChanges) -> WorkerSpec:
    """The stored worker with the given fields changed."""
    queues = _given(changes.queues, current.queues)
    slots = current.slots
    if not isinstance(changes.slots, Unset):
        if not isinstance(changes.queues, Unset):
            raise InvalidFieldError("slots", "give either `slots` or `queues`, not both")
        slots, queues = changes.slots, _queues_for_slots(current, changes.slots)
    return WorkerSpec(
        name=current.name,
        resources=_given(changes.resources, current.resources),
        slots=slots,
        rank=_given(changes.rank, current.rank),
        state=_given(changes.state, current.state),
        queues=queues,
        properties=_given(changes.properties, current.properties),
        inventory=_given(changes.inventory, current.inventory),
    )


def note_state(
    worker: Worker,
    previous: WorkerState,
    *,
    reason: str | Unset | None = UNSET,
    by: str,
) -> None:
    """Record who changed the worker's state (or its reason) and when; a change of state
    without a reason clears the old reason, which explained the old state."""
    if worker.state is previous and isinstance(reason, Unset):
        return
    worker.state_reason = None if isinstance(reason, Unset) else reason
    worker.state_set_by = by
    worker.state_changed_at = utcnow()


def _check_state_given(given: WorkerState | Unset, previous: WorkerState | None) -> None:
    """``unknown`` is the server's word for a silent worker (app/matching/liveness.py):
    nobody sets it, though a change of other fields of an unknown worker keeps it."""
    if given is WorkerState.UNKNOWN and previous is not WorkerState.UNKNOWN:
        raise InvalidFieldError(
            "state",
            "`unknown` is set by the server when a worker is not heard from for "
            "JOBMATCH_WORKER_TIMEOUT_SECONDS; give active, draining, offline or disabled",
        )


def register_worker(
    session: Session, spec: WorkerSpec, *, by: str, replace: bool
) -> tuple[Worker, bool]:
    """``upsert_worker`` (the whole worker replaced), noting who set its state when the
    registration changes it. Returns (worker, created). A worker of that name that exists
    is replaced only when ``replace`` says so; otherwise :class:`WorkerExistsError` and
    nothing is changed (a second registration of a name is more often a mistake, a
    copied command or a clash of host names, than a wish to reset the worker)."""
    previous = session.scalar(select(Worker.state).where(Worker.name == spec.name))
    _check_state_given(spec.state, previous)
    if previous is not None and not replace:
        raise WorkerExistsError(spec.name)
    worker, created = upsert_worker(session, spec)
    note_state(worker, previous or worker.state, by=by)
    domain_events.worker_event(
        session,
        "registered" if created else "replaced",
        worker.name,
        state=worker.state.value,
        by=by,
    )
    return worker, created


def update_worker(session: Session, name: str, changes: WorkerChanges, *, by: str) -> Worker:
    """Change only the given fields of the worker ``name``; ``by`` names who asked (the
    token's role or subject). Validation, the misfit cache and the generation follow
    ``upsert_worker``: a change that can alter what the worker fits bumps the generation.
    A state change alone does not: draining and disabling are read live, not cached."""
    worker = worker_by_name(session, name, lock=True)
    previous = worker.state
    _check_state_given(changes.state, previous)
    spec = _merged(stored_spec(session, worker), changes)
    worker, _created = upsert_worker(session, spec)
    note_state(worker, previous, reason=changes.reason, by=by)
    session.flush()
    if worker.state is not previous:
        # Draining, disabling, reactivating: the changes of state an operator looks for.
        domain_events.worker_event(
            session,
            "state_changed",
            worker.name,
            previous=previous.value,
            state=worker.state.value,
            reason=worker.state_reason,
            by=by,
        )
    else:
        domain_events.worker_event(session, "updated", worker.name, by=by)
    return worker


def _running_job_ids(session: Session, worker: Worker) -> list[int]:
    """The running jobs that hold anything of the worker: jobs started on it, and jobs of
    other workers with slots of its queue instances or vertices of its inventory."""
    holds_slots = exists().where(
        Allocation.job_id == Job.id,
        Allocation.released_at.is_(None),
        Allocation.queue_instance_id == QueueInstance.id,
        QueueInstance.worker_id == worker.id,
    )
    holds_vertices = exists().where(
        InventoryBooking.job_id == Job.id,
        InventoryBooking.worker_id == worker.id,
        InventoryBooking.released_at.is_(None),
    )
    return list(
        session.scalars(
            select(Job.id)
            .where(
                Job.state == JobState.RUNNING,
                or_(Job.worker_id == worker.id, holds_slots, holds_vertices),
            )
            .order_by(Job.id)
        )
    )


def _requeue(session: Session, job_ids: list[int], worker: Worker, *, by: str) -> None:
    """Return the jobs to the queue, freeing everything they hold, each with a history
    entry that says why."""
    involved: set[int] = set()
    for job_id in job_ids:
        job = session.get(Job, job_id)
        if job is not None and job.worker_id is not None:
            involved |= {job.worker_id} | booked_workers(session, job_id)
    others = involved - {worker.id}
    lock_workers(session, others)
    # What the jobs held on other workers is freed: those workers' waiting pulls look again.
    announce.rooms_changed(session, others)
    detail = f"worker {worker.name} was deleted by {by}; the job waits again"
    for job_id in job_ids:
        job = session.get(Job, job_id, with_for_update=True, populate_existing=True)
        if job is None or job.state is not JobState.RUNNING:
            continue
        release_allocations(session, job)
        wait_again(
            session,
            job,
            JobEventKind.REQUEUED,
            worker=worker.name,
            detail=detail,
            cause=domain_events.WORKER_DELETED,
        )
    session.flush()


def delete_worker(session: Session, name: str, *, requeue: bool, by: str) -> list[int]:
    """Remove the worker ``name``, its queue instances, rows and tokens. A worker that runs
    jobs is refused (ConflictError) unless ``requeue``, which first returns its jobs to
    the queue; their ids are returned. Finished jobs keep their history (the worker's
    name is text there) and lose only the link to the row."""
    worker = worker_by_name(session, name, lock=True)
    running = _running_job_ids(session, worker)
    if running and not requeue:
        listed = ", ".join(str(job_id) for job_id in running)
        raise ConflictError(
            f"worker {name!r} runs {noun(len(running), 'job')} {listed}; drain it and wait "
            f"for {noun(len(running), 'it', 'them')} to end, or delete it with requeue=true "
            f"to return {noun(len(running), 'it', 'them')} to the queue"
        )
    if running:
        _requeue(session, running, worker, by=by)
    session.execute(
        update(ApiToken)
        .where(
            ApiToken.role == Role.WORKER,
            ApiToken.subject == name,
            ApiToken.revoked_at.is_(None),
        )
        .values(revoked_at=utcnow())
    )
    # Every API process forgets what it remembered of tokens (app/db/revocations.py).
    announce_revocation(session)
    # The worker changed (it is gone): a long-poll hub that remembers its id for its name
    # (app/matching/wakeups.py) must not let a pull of a worker registered again under the
    # name stand on the old worker's last attempt, indexed under the old id.
    announce.workers_changed(session, [worker.id])
    # Its misfit rows go with it (ON DELETE CASCADE); fit rows have no foreign key.
    session.execute(delete(CategoryFit).where(CategoryFit.worker_id == worker.id))
    session.delete(worker)
    session.flush()
    domain_events.worker_event(session, "deleted", name, requeued_jobs=len(running), by=by)
    return running
