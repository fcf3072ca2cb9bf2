"""Resource quota sets (Grid Engine 6.2's ``qconf -arqs``, ``-srqs``, ``-mrqs``,
``-drqs``): admins write them in their text form; every enabled set holds every Grid
Engine dispatch (docs/notations/gridengine.md#resource-quota-sets)."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Response, status

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.paging import Paging100Dep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath, Page
from app.api.schemas.quotas import (
    QuotaLimitOut,
    QuotaRuleOut,
    QuotaSetIn,
    QuotaSetOut,
    QuotaUsageOut,
)
from app.db.models import QuotaSet as QuotaSetRow
from app.matching.gridengine import quota_sets

router = APIRouter(prefix="/v1", tags=["grid engine"], route_class=RetryingRoute)


def _out(session: SessionDep, row: QuotaSetRow) -> QuotaSetOut:
    definition = quota_sets.definition_of(row)
    return QuotaSetOut(
        name=row.name,
        description=row.description,
        enabled=row.enabled,
        text=row.text,
        rules=[
            QuotaRuleOut(
                label=definition.rule_label(index),
                text=rule.to_text(),
                limits=[
                    QuotaLimitOut(attribute=limit.attribute, value=limit.text)
                    for limit in rule.limits
                ],
            )
            for index, rule in enumerate(definition.rules)
        ],
        usage=[
            QuotaUsageOut.model_validate(line, from_attributes=True)
            for line in quota_sets.usage_lines(session, row)
        ],
    )


@router.post(
    "/quotas",
    status_code=status.HTTP_201_CREATED,
    operation_id="create_quota_set",
    summary="Create a resource quota set",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def create_quota_set(body: QuotaSetIn, session: SessionDep, _admin: AdminDep) -> QuotaSetOut:
    """Add a resource quota set from its ``qconf -arqs`` text. The jobs running now are
    counted against it at once; 409 when a set of that name exists, 422 (naming the
    position and what was expected) when the text is not a valid set."""
    return _out(session, quota_sets.create_quota_set(session, body.text))


@router.get(
    "/quotas",
    operation_id="list_quota_sets",
    summary="List resource quota sets",
    responses=errors(401, 403, 422, 503),
)
def list_quota_sets(
    session: SessionDep, _admin: AdminDep, paging: Paging100Dep
) -> Page[QuotaSetOut]:
    """The resource quota sets (``qconf -srqsl``) sorted by name, with their rules and
    usage, a page at a time."""
    return paging.listing(partial(quota_sets.list_quota_sets, session), partial(_out, session))


@router.get(
    "/quotas/{name}",
    operation_id="get_quota_set",
    summary="Read one resource quota set",
    responses=errors(401, 403, 404, 422, 503),
)
def get_quota_set(name: NamePath, session: SessionDep, _admin: AdminDep) -> QuotaSetOut:
    """A set (``qconf -srqs name``) with what running jobs hold of each of its limits per
    usage key (as ``qquota`` shows it)."""
    return _out(session, quota_sets.get_quota_set(session, name))


@router.put(
    "/quotas/{name}",
    operation_id="replace_quota_set",
    summary="Replace a resource quota set",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def replace_quota_set(
    name: NamePath, body: QuotaSetIn, session: SessionDep, _admin: AdminDep
) -> QuotaSetOut:
    """Replace a set's definition (``qconf -mrqs``); its usage is counted again from the
    running jobs. The text must name the same set (422 otherwise)."""
    return _out(session, quota_sets.replace_quota_set(session, name, body.text))


@router.delete(
    "/quotas/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_quota_set",
    summary="Delete a resource quota set",
    responses=errors(401, 403, 404, 422, 503),
)
def delete_quota_set(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a set (``qconf -drqs``) and its books; waiting jobs it held may run."""
    quota_sets.delete_quota_set(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
