"""``GET /v1/demand/scale`` (issue 40): the demand figures as plain numbers, in the shape
KEDA's ``metrics-api`` scaler reads (a GET with a bearer token, then one number at a GJSON
``valueLocation``; https://keda.sh/docs/latest/scalers/metrics-api/)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from sqlalchemy.orm import Session

from app.api.auth import AdminDep
from app.api.demand_gauges import DemandFigures, DemandGauges, figures_of
from app.api.deps import SessionDep
from app.api.responses import errors
from app.api.retries import RetryingRoute
from app.api.routes.demand import EVERY_TEMPLATE, TemplatesQuery, template_names
from app.api.schemas.demand_scale import DemandScaleOut, TemplateScaleOut
from app.db.base import utcnow
from app.matching.demand import templates as template_store
from app.matching.demand.report import demand as demand_report

router = APIRouter(prefix="/v1", tags=["demand"], route_class=RetryingRoute)


def _figures_now(session: Session, request: Request, names: list[str]) -> DemandFigures:
    """Demand now, with the named templates (or every one: ``*``), in this request's
    transaction (the simulation's savepoints are rolled back)."""
    started = time.monotonic()
    if names == [EVERY_TEMPLATE]:
        chosen = template_store.list_templates(session)
    else:
        chosen = template_store.templates_named(session, names)
    answer = demand_report(
        session,
        request.app.state.settings.allocation_policy,
        utcnow(),
        templates=chosen or None,
        # The figures need the totals and the suggestion only, not a page of categories.
        limit=1,
        offset=0,
    )
    return figures_of(answer, [t.name for t in chosen], time.time(), time.monotonic() - started)


@router.get(
    "/demand/scale",
    operation_id="get_demand_scale",
    summary="Demand as plain numbers for autoscalers (KEDA metrics-api)",
    responses=errors(401, 403, 422, 503),
)
def get_demand_scale(
    request: Request,
    session: SessionDep,
    _admin: AdminDep,
    templates: TemplatesQuery = None,
) -> DemandScaleOut:
    """The figures of `GET /v1/demand?templates=*` at fixed JSON paths, for an autoscaler
    that reads one number: `templates.NAME.workers` (new workers of that template in the
    suggested mix), `templates.NAME.jobs` (the waiting jobs they would start),
    `jobs.never|capacity|policy|ready|waiting`, `workers` and `unrunnable`.

    Without `templates` the figures are the server process's cached ones (every template,
    recomputed in the background at most once per JOBMATCH_DEMAND_METRICS_SECONDS, as
    `/metrics` shows them; `age_seconds` says how old), so that any number of scalers
    polling costs one computation per period. With `templates` (names, or `*`), or with
    the cache off (0), they are computed for this request."""
    names = template_names(templates)
    gauges: DemandGauges = request.app.state.demand_gauges
    figures = gauges.figures() if names is None else None
    if figures is None:
        figures = _figures_now(session, request, names or [EVERY_TEMPLATE])
    return DemandScaleOut(
        templates={
            name: TemplateScaleOut(workers=workers, jobs=figures.starts[name])
            for name, workers in sorted(figures.workers.items())
        },
        jobs={**figures.totals, "waiting": sum(figures.totals.values())},
        workers=sum(figures.workers.values()),
        unrunnable=figures.unrunnable,
        age_seconds=max(time.time() - figures.computed_at, 0.0),
    )
