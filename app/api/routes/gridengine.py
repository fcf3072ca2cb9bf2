"""Grid Engine administration: the complex attribute table, values per level, parallel
environments, and the scheduling run."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Response, status

from app.api.auth import AdminDep, SubmitterDep
from app.api.deps import SessionDep
from app.api.paging import Paging100Dep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath, Page
from app.api.schemas.gridengine import (
    AttributeIn,
    AttributeOut,
    ConsumptionOut,
    PeIn,
    PeOut,
    ScheduleOut,
    ValuesIn,
    ValuesOut,
    ValuesRead,
)
from app.db.models import Attribute, ParallelEnvironment
from app.matching.gridengine import admin as gridengine_admin
from app.matching.gridengine import parallel
from app.matching.gridengine import table as gridengine_table
from app.matching.gridengine.run import schedule
from app.matching.gridengine.values import read_values, resolve_target

router = APIRouter(prefix="/v1", tags=["grid engine"], route_class=RetryingRoute)


def _out(attribute: Attribute) -> AttributeOut:
    return AttributeOut.model_validate(attribute, from_attributes=True)


@router.get(
    "/attributes",
    operation_id="list_attributes",
    summary="List complex attributes",
    responses=errors(401, 403, 422, 503),
)
def list_attributes(
    session: SessionDep, _who: SubmitterDep, paging: Paging100Dep
) -> Page[AttributeOut]:
    """The attribute table (``qconf -sc``), sorted by name, a page at a time."""
    return paging.listing(partial(gridengine_table.list_attributes, session), _out)


@router.get(
    "/attributes/{name}",
    operation_id="get_attribute",
    summary="Show a complex attribute",
    responses=errors(401, 403, 404, 422, 503),
)
def get_attribute(name: NamePath, session: SessionDep, _who: SubmitterDep) -> AttributeOut:
    """One row of the attribute table, by its name (not its shortcut)."""
    return _out(gridengine_table.get_attribute(session, name))


@router.post(
    "/attributes",
    status_code=status.HTTP_201_CREATED,
    operation_id="create_attribute",
    summary="Add a complex attribute",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def create_attribute(body: AttributeIn, session: SessionDep, _admin: AdminDep) -> AttributeOut:
    """Add an attribute (``qconf -ac``); the row must satisfy Grid Engine's validity
    rules (422 naming the rule), and its name and shortcut must be free (409)."""
    definition = gridengine_table.definition_from_body(body.model_dump())
    return _out(gridengine_table.create_attribute(session, definition))


@router.put(
    "/attributes/{name}",
    operation_id="change_attribute",
    summary="Change a complex attribute",
    responses=errors(401, 403, 404, 409, 503, *BODY_ERRORS),
)
def change_attribute(
    name: NamePath, body: AttributeIn, session: SessionDep, _admin: AdminDep
) -> AttributeOut:
    """Change an attribute (``qconf -mc``): a built-in keeps its type (the string types
    may switch); 409 when the new name or shortcut is taken, or when values or requests
    use it and its type or consumable kind would change."""
    definition = gridengine_table.definition_from_body(body.model_dump())
    return _out(gridengine_admin.change_attribute(session, name, definition))


@router.delete(
    "/attributes/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_attribute",
    summary="Delete a complex attribute",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def delete_attribute(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a user-defined attribute that nothing uses (409 for a built-in one, or one
    that values or requests use)."""
    gridengine_table.delete_attribute(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _apply(
    session: SessionDep, level: str, host: str | None, queue: str | None, body: ValuesIn
) -> ValuesOut:
    target = resolve_target(session, level, host, queue)
    return ValuesOut(static_changed=gridengine_admin.apply_values(session, target, body.by_kind()))


def _read(session: SessionDep, level: str, host: str | None, queue: str | None) -> ValuesRead:
    view = read_values(session, resolve_target(session, level, host, queue))
    return ValuesRead(
        complex_values=view.complex_values,
        load_values=view.load_values,
        reported_load_values=view.reported_load_values,
        attributes=view.attributes,
        consumables={
            name: ConsumptionOut(capacity=c.capacity, used=c.used)
            for name, c in view.consumables.items()
        },
        matching_uses=view.matching_uses,
    )


@router.get(
    "/values/global",
    operation_id="get_global_values",
    summary="Read the global host's complex values",
    responses=errors(401, 403, 503),
)
def get_global_values(session: SessionDep, _who: SubmitterDep) -> ValuesRead:
    """The values of the global host (``qconf -se global``) and its consumables' use."""
    return _read(session, "global", None, None)


@router.get(
    "/values/hosts/{host}",
    operation_id="get_host_values",
    summary="Read an execution host's complex and load values",
    responses=errors(401, 403, 404, 422, 503),
)
def get_host_values(host: NamePath, session: SessionDep, _who: SubmitterDep) -> ValuesRead:
    """The values of an execution host, a worker (``qconf -se host``)."""
    return _read(session, "host", host, None)


@router.get(
    "/values/queues/{queue}/{host}",
    operation_id="get_queue_values",
    summary="Read a queue instance's values",
    responses=errors(401, 403, 404, 422, 503),
)
def get_queue_values(
    queue: NamePath, host: NamePath, session: SessionDep, _who: SubmitterDep
) -> ValuesRead:
    """The values of the queue instance ``queue@host``, its built-in attributes included."""
    return _read(session, "queue_instance", host, queue)


@router.put(
    "/values/global",
    operation_id="set_global_values",
    summary="Set the global host's values",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def set_global_values(body: ValuesIn, session: SessionDep, _admin: AdminDep) -> ValuesOut:
    """Values of the global host (``qconf -me global``); 409 when a consumable's capacity
    would drop below what running jobs booked."""
    return _apply(session, "global", None, None, body)


@router.put(
    "/values/hosts/{host}",
    operation_id="set_host_values",
    summary="Set an execution host's values",
    responses=errors(401, 403, 404, 409, 503, *BODY_ERRORS),
)
def set_host_values(
    host: NamePath, body: ValuesIn, session: SessionDep, _admin: AdminDep
) -> ValuesOut:
    """Values of an execution host, a worker (``qconf -me host``); 409 when a consumable's
    capacity would drop below what running jobs booked."""
    return _apply(session, "host", host, None, body)


@router.put(
    "/values/queues/{queue}/{host}",
    operation_id="set_queue_values",
    summary="Set a queue instance's values",
    responses=errors(401, 403, 404, 409, 503, *BODY_ERRORS),
)
def set_queue_values(
    queue: NamePath, host: NamePath, body: ValuesIn, session: SessionDep, _admin: AdminDep
) -> ValuesOut:
    """Values of the queue instance ``queue@host`` (``qconf -mq``); 409 when a
    consumable's capacity would drop below what running jobs booked."""
    return _apply(session, "queue_instance", host, queue, body)


def _pe_out(pe: ParallelEnvironment) -> PeOut:
    return PeOut.model_validate(pe, from_attributes=True)


@router.get(
    "/pes",
    operation_id="list_pes",
    summary="List parallel environments",
    responses=errors(401, 403, 422, 503),
)
def list_pes(session: SessionDep, _who: SubmitterDep, paging: Paging100Dep) -> Page[PeOut]:
    """The parallel environments (``qconf -spl``) with their allocation rules and slots,
    sorted by name, a page at a time."""
    return paging.listing(partial(parallel.list_pes, session), _pe_out)


@router.get(
    "/pes/{name}",
    operation_id="get_pe",
    summary="Read one parallel environment",
    responses=errors(401, 403, 404, 422, 503),
)
def get_pe(name: NamePath, session: SessionDep, _who: SubmitterDep) -> PeOut:
    """A parallel environment's allocation rule and slots (``qconf -sp name``)."""
    return _pe_out(parallel.get_pe(session, name))


@router.put(
    "/pes/{name}",
    operation_id="put_pe",
    summary="Create or change a parallel environment",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def put_pe(name: NamePath, body: PeIn, session: SessionDep, _admin: AdminDep) -> PeOut:
    """Create or change a parallel environment (``qconf -ap``/``-mp``): its allocation
    rule and total slots. 409 when a concurrent request created the same new name first."""
    pe, _created = parallel.upsert_pe(session, name, body.allocation_rule, body.slots)
    return _pe_out(pe)


@router.delete(
    "/pes/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_pe",
    summary="Delete a parallel environment",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def delete_pe(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a parallel environment that no job asks for (409 otherwise)."""
    parallel.delete_pe(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/schedule",
    operation_id="run_schedule",
    summary="Run the Grid Engine scheduler once",
    responses=errors(401, 403, 409, 503),
)
def run_schedule(session: SessionDep, _admin: AdminDep) -> ScheduleOut:
    """One scheduling run: waiting jobs in priority, then age order, each seeing the
    bookings of the ones before. 409 when a booking lost a race with a concurrent pull
    (nothing of the run is kept; run it again)."""
    report = schedule(session)
    return ScheduleOut.model_validate(report, from_attributes=True)
