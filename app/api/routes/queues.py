"""Cluster queues: read one, set its ``seq_no`` and ``load_thresholds`` (queue_conf(5);
docs/notations/gridengine.md#load-thresholds); a queue instance's states (``qmod -d``,
``-s``) and per-host values; the scheduler configuration (sched_conf(5)
``queue_sort_method``, ``load_formula``)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath
from app.api.schemas.queues import (
    QueueConfIn,
    QueueConfOut,
    QueueInstanceConfIn,
    QueueInstanceConfOut,
    SchedulerConfIn,
    SchedulerConfOut,
)
from app.db.models import Queue, QueueInstance, SchedulerConfig
from app.matching.gridengine import queue_conf, queue_sort
from app.matching.gridengine.table import load_table

router = APIRouter(prefix="/v1", tags=["grid engine"], route_class=RetryingRoute)


def _out(queue: Queue) -> QueueConfOut:
    return QueueConfOut(name=queue.name, seq_no=queue.seq_no, load_thresholds=queue.load_thresholds)


@router.get(
    "/queues/{name}",
    response_model=QueueConfOut,
    operation_id="get_queue",
    summary="Read a cluster queue",
    responses=errors(401, 403, 404, 422, 503),
)
def get_queue(name: NamePath, session: SessionDep, _admin: AdminDep) -> QueueConfOut:
    """A cluster queue's configuration (``qconf -sq name``, the attributes jobmatch
    models); 404 when no worker offers the queue."""
    return _out(queue_conf.get_queue(session, name))


@router.put(
    "/queues/{name}",
    response_model=QueueConfOut,
    operation_id="configure_queue",
    summary="Set a cluster queue's seq_no or load thresholds",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def configure_queue(
    name: NamePath, body: QueueConfIn, session: SessionDep, _admin: AdminDep
) -> QueueConfOut:
    """Set the fields given: ``seq_no`` (the queue order of the instances without their
    own) and ``load_thresholds``: an instance whose host's load value exceeds one (by the
    attribute's relop: ``np_load_avg`` alarms at or above it) takes no new job. 422
    naming the position when the list is not valid, and nothing is changed."""
    queue = queue_conf.get_queue(session, name)
    if body.load_thresholds is not None:
        queue = queue_conf.set_load_thresholds(session, name, body.load_thresholds)
    if body.seq_no is not None:
        queue = queue_conf.set_seq_no(session, name, body.seq_no)
    return _out(queue)


def _instance_out(session: SessionDep, instance: QueueInstance) -> QueueInstanceConfOut:
    queue = session.get(Queue, instance.queue_id)
    assert queue is not None
    return QueueInstanceConfOut(
        name=f"{queue.name}@{instance.worker.name}",
        slots=instance.slots,
        used_slots=instance.used_slots,
        disabled=instance.disabled,
        suspended=instance.suspended,
        own_seq_no=instance.seq_no,
        seq_no=queue.seq_no if instance.seq_no is None else instance.seq_no,
        own_load_thresholds=instance.load_thresholds,
        load_thresholds=(
            queue.load_thresholds if instance.load_thresholds is None else instance.load_thresholds
        ),
    )


@router.get(
    "/queues/{name}/instances/{host}",
    response_model=QueueInstanceConfOut,
    operation_id="get_queue_instance",
    summary="Read a queue instance",
    responses=errors(401, 403, 404, 422, 503),
)
def get_queue_instance(
    name: NamePath, host: NamePath, session: SessionDep, _admin: AdminDep
) -> QueueInstanceConfOut:
    """The instance ``name@host`` (``qstat -f``'s states, ``qconf -sq``'s per-host
    values); 404 when the worker offers no such queue."""
    return _instance_out(session, queue_conf.get_instance(session, name, host))


@router.patch(
    "/queues/{name}/instances/{host}",
    response_model=QueueInstanceConfOut,
    operation_id="update_queue_instance",
    summary="Disable, suspend or resume a queue instance, or set its own values",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def update_queue_instance(
    name: NamePath, host: NamePath, body: QueueInstanceConfIn, session: SessionDep, _admin: AdminDep
) -> QueueInstanceConfOut:
    """Change only the fields given (JSON merge patch): ``{"disabled": true}`` is ``qmod
    -d name@host``, ``{"suspended": true}`` ``qmod -s``; either takes no new job (jobs it
    runs go on), and explain says so in qstat -j's words. ``seq_no`` and
    ``load_thresholds`` set the instance's own values (``seq_no 0,[host=1]``), ``null``
    gives it the queue's again. 422 for invalid thresholds, and nothing is changed."""
    given = body.model_fields_set
    unset = queue_conf.UNSET
    changes = queue_conf.InstanceChanges(
        disabled=body.disabled if "disabled" in given and body.disabled is not None else unset,
        suspended=(
            body.suspended if "suspended" in given and body.suspended is not None else unset
        ),
        seq_no=body.seq_no if "seq_no" in given else unset,
        load_thresholds=body.load_thresholds if "load_thresholds" in given else unset,
    )
    return _instance_out(session, queue_conf.change_instance(session, name, host, changes))


def _scheduler_out(row: SchedulerConfig | None) -> SchedulerConfOut:
    if row is None:
        return SchedulerConfOut(configured=False, queue_sort_method=None, load_formula=None)
    return SchedulerConfOut(
        configured=True, queue_sort_method=row.queue_sort_method, load_formula=row.load_formula
    )


@router.get(
    "/scheduler",
    response_model=SchedulerConfOut,
    operation_id="get_scheduler_config",
    summary="Read the scheduler configuration",
    responses=errors(401, 403, 503),
)
def get_scheduler_config(session: SessionDep, _admin: AdminDep) -> SchedulerConfOut:
    """``queue_sort_method`` and ``load_formula`` (``qconf -ssconf``, the parts jobmatch
    models); ``configured`` false when none is stored."""
    return _scheduler_out(queue_sort.get_scheduler_config(session))


@router.put(
    "/scheduler",
    response_model=SchedulerConfOut,
    operation_id="configure_scheduler",
    summary="Set the queue sort method and load formula",
    responses=errors(401, 403, 503, *BODY_ERRORS),
)
def configure_scheduler(
    body: SchedulerConfIn, session: SessionDep, _admin: AdminDep
) -> SchedulerConfOut:
    """``load``: queue instances sort by their host's load formula value (lowest first),
    then seq_no; ``seqno``: by seq_no, then the value; then creation. 422 naming the
    position when the formula is not valid, and nothing is stored."""
    return _scheduler_out(
        queue_sort.set_scheduler_config(
            session, body.queue_sort_method, body.load_formula, load_table(session)
        )
    )


@router.delete(
    "/scheduler",
    response_model=SchedulerConfOut,
    operation_id="reset_scheduler",
    summary="Remove the scheduler configuration",
    responses=errors(401, 403, 503),
)
def reset_scheduler(session: SessionDep, _admin: AdminDep) -> SchedulerConfOut:
    """Queue instances sort by seq_no, then creation again, and no load is read."""
    queue_sort.reset_scheduler_config(session)
    return _scheduler_out(None)
