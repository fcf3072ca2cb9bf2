"""Demand (issue 40): ``GET /v1/demand``, what the waiting jobs need in the terms an
autoscaler acts on, and the worker templates (``/v1/templates``) it simulates."""

from __future__ import annotations

import json
import re
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from sqlalchemy.orm import Session

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.paging import Paging50Dep, Paging100Dep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NAME_PATTERN, NamePath, Page
from app.api.schemas.demand import (
    CategoryDemandOut,
    DemandOut,
    SuggestionOut,
    TemplateIn,
    TemplateOut,
)
from app.db.base import utcnow
from app.matching.demand import templates as template_store
from app.matching.demand.report import demand as demand_report
from app.matching.demand.templates import Template
from app.matching.errors import InvalidFieldError

router = APIRouter(prefix="/v1", tags=["demand"], route_class=RetryingRoute)

#: Templates one demand may simulate (each is a registration and a pass over the
#: categories that wait, in a savepoint).
MAX_TEMPLATES = 64
#: ``templates=*``: every registered template.
EVERY_TEMPLATE = "*"


def _template_out(template: Template) -> TemplateOut:
    body = template.body
    return TemplateOut(
        name=template.name,
        resources=body.get("resources", ""),
        slots=body.get("slots", 1),
        state=body.get("state", "active"),
        queues=body.get("queues"),
        properties=body.get("properties", []),
        inventory=body.get("inventory"),
        cost=template.cost,
        max_count=template.max_count,
    )


@router.put(
    "/templates/{name}",
    operation_id="put_template",
    summary="Register or replace a worker template",
    responses={
        200: {"description": "The template of that name was replaced"},
        201: {"model": TemplateOut, "description": "A new template was registered"},
        **errors(401, 403, 503, *BODY_ERRORS),
    },
)
def put_template(
    name: NamePath, body: TemplateIn, session: SessionDep, _admin: AdminDep, response: Response
) -> TemplateOut:
    """A kind of worker an autoscaler can create: a worker body as `POST /v1/workers`
    takes it, without a name, with a `cost` per new worker and a `max_count`. It is
    checked by registering one worker of it in a transaction that is rolled back: what a
    registration refuses (422 naming the field), a template refuses, and nothing is
    stored. With a template registered, a job that no registered worker fits but a new
    worker of a template would waits for one instead of failing at submission."""
    stored, created = template_store.put_template(
        session, Template(name, body.worker_body(), body.cost, body.max_count)
    )
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return _template_out(stored)


@router.get(
    "/templates",
    operation_id="list_templates",
    summary="List worker templates",
    responses=errors(401, 403, 422, 503),
)
def list_templates(
    session: SessionDep, _admin: AdminDep, paging: Paging100Dep
) -> Page[TemplateOut]:
    """Worker templates by name."""
    return paging.listing(
        lambda limit, offset: template_store.list_templates(session, limit=limit, offset=offset),
        _template_out,
    )


@router.get(
    "/templates/{name}",
    operation_id="get_template",
    summary="One worker template",
    responses=errors(401, 403, 404, 422, 503),
)
def get_template(name: NamePath, session: SessionDep, _admin: AdminDep) -> TemplateOut:
    """The template: its worker body, cost and `max_count`."""
    return _template_out(template_store.get_template(session, name))


@router.delete(
    "/templates/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_template",
    summary="Delete a worker template",
    responses=errors(401, 403, 404, 422, 503),
)
def delete_template(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a template. Jobs that waited for its workers keep waiting (a job fails at
    submission only; see `GET /v1/demand` for what nothing could run)."""
    template_store.delete_template(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def template_names(text: str | None) -> list[str] | None:
    """The ``templates`` parameter: None when absent, ``*`` for every template, else a
    comma-separated list of names (checked before any work)."""
    if text is None:
        return None
    if text == EVERY_TEMPLATE:
        return [EVERY_TEMPLATE]
    names = [name.strip() for name in text.split(",")]
    if len(names) > MAX_TEMPLATES:
        raise InvalidFieldError(
            "templates", f"{len(names)} templates; at most {MAX_TEMPLATES}", location="query"
        )
    for position, name in enumerate(names):
        if not re.fullmatch(NAME_PATTERN, name) or len(name) > 255:
            raise InvalidFieldError(
                "templates",
                f"item {position + 1} ({json.dumps(name)}): expected a template name "
                "(letters, digits and _.:@+-, at most 255 characters) or `*` alone",
                location="query",
            )
    return list(dict.fromkeys(names))


TemplatesQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_TEMPLATES * 256,
        description="worker templates to simulate, comma-separated, or `*` for all of them",
    ),
]


def demand_for(
    session: Session,
    request: Request,
    *,
    templates: list[str] | None,
    limit: int,
    offset: int,
) -> DemandOut:
    """The demand answer, for the API and for the adapters built on it (the console,
    metrics): ``templates`` as :func:`template_names` gives them."""
    chosen = None
    if templates == [EVERY_TEMPLATE]:
        chosen = template_store.list_templates(session)
    elif templates is not None:
        chosen = template_store.templates_named(session, templates)
    answer = demand_report(
        session,
        request.app.state.settings.allocation_policy,
        utcnow(),
        templates=chosen,
        limit=limit,
        offset=offset,
    )
    more = offset + limit < answer.total
    return DemandOut(
        items=[
            CategoryDemandOut.model_validate(c, from_attributes=True) for c in answer.categories
        ],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if more else None,
        categories=answer.total,
        jobs=answer.jobs,
        category_counts=answer.category_counts,
        suggestion=SuggestionOut.model_validate(answer.suggestion, from_attributes=True)
        if answer.suggestion is not None
        else None,
    )


@router.get(
    "/demand",
    operation_id="get_demand",
    summary="What the waiting jobs need: why each category waits, and what to add",
    responses=errors(401, 403, 422, 503),
)
def get_demand(
    request: Request,
    session: SessionDep,
    _admin: AdminDep,
    paging: Paging50Dep,
    templates: TemplatesQuery = None,
) -> DemandOut:
    """The waiting jobs by category (by id, paged): how many, how old the oldest, what
    they ask for, and why they wait: `never` (no registered worker, or set of workers for
    a job on several nodes, could ever hold one; `reasons` say what is missing), `capacity`
    (fitting workers are busy or not taking work; `need` says what would start all of
    them), `policy` (a quota, an array's -tc or another rule of the pull holds them) or
    `ready` (a pull or an allocation now would start one). Totals per answer cover every
    category. The answers are the pull's own decision, rehearsed and rolled back.

    With `templates` (names, or `*`): new workers of each template are registered in a
    transaction that is rolled back, and the real pull and allocation say which waiting
    jobs that today's workers cannot start now they would start; a packing of slots and
    inventory vertices counts how many. `suggestion` holds each template alone, a
    suggested mix (least total cost, then fewest workers, within each `max_count`) and the
    jobs no template could run. Nothing is stored."""
    return demand_for(
        session,
        request,
        templates=template_names(templates),
        limit=paging.limit,
        offset=paging.offset,
    )
