"""Categories: the requests jobs share, their counts, and which workers fit them (the SQL
view ``v_category_fit`` over HTTP)."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter

from app.api.auth import SubmitterDep
from app.api.deps import SessionDep
from app.api.paging import Paging50Dep
from app.api.responses import errors
from app.api.retries import RetryingRoute
from app.api.schemas.categories import (
    CategoryDetailOut,
    CategoryOut,
    WorkerFitOut,
)
from app.api.schemas.common import IdPath, Page
from app.matching import category_fit

router = APIRouter(prefix="/v1/categories", tags=["categories"], route_class=RetryingRoute)


def _out(view: category_fit.CategoryView) -> CategoryOut:
    return CategoryOut.model_validate(view, from_attributes=True)


@router.get(
    "",
    operation_id="list_categories",
    summary="List job categories with their counts",
    responses=errors(401, 403, 422, 503),
)
def list_categories(
    session: SessionDep, _who: SubmitterDep, paging: Paging50Dep
) -> Page[CategoryOut]:
    """Categories in the order they were first asked for: what their jobs ask for (per
    family, in its notation), how many wait and run, and how many workers fit them."""
    return paging.listing(partial(category_fit.list_categories, session), _out)


@router.get(
    "/{category_id}",
    operation_id="get_category",
    summary="One category and its fit over every worker",
    responses=errors(401, 403, 404, 422, 503),
)
def get_category(category_id: IdPath, session: SessionDep, _who: SubmitterDep) -> CategoryDetailOut:
    """The category, and per worker: whether it fits, or the reason code of the first
    failing clause (the codes of `v_category_fit`) and what the code means."""
    view = category_fit.get_category(session, category_id)
    fit = category_fit.category_fit(session, category_id)
    return CategoryDetailOut(
        **_out(view).model_dump(),
        workers=[WorkerFitOut(**vars(worker)) for worker in fit],
    )
