"""Cluster queues: read one, set its ``load_thresholds`` (queue_conf(5);
docs/notations/gridengine.md#load-thresholds)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath
from app.api.schemas.queues import QueueConfIn, QueueConfOut
from app.db.models import Queue
from app.matching.gridengine import queue_conf

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
    summary="Set a cluster queue's load thresholds",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def configure_queue(
    name: NamePath, body: QueueConfIn, session: SessionDep, _admin: AdminDep
) -> QueueConfOut:
    """Set the queue's ``load_thresholds``: an instance whose host's load value exceeds
    one (by the attribute's relop: ``np_load_avg`` alarms at or above it) takes no new
    job. 422 naming the position when the list is not valid."""
    return _out(queue_conf.set_load_thresholds(session, name, body.load_thresholds))
