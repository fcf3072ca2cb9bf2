"""Liveness and readiness probes; open to unauthenticated callers, as probes are."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app import __version__
from app.api.deps import DatabaseDep
from app.db.migrate import current_revisions, head_revisions

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


@router.get("/healthz", summary="Liveness: the process answers")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get(
    "/readyz",
    summary="Readiness: the database answers and its schema is at the migration head",
    responses={503: {"description": "Database unreachable or schema not at head"}},
)
def readyz(database: DatabaseDep) -> JSONResponse:
    try:
        database.ping()
        current = current_revisions(database.engine)
        heads = head_revisions()
    except Exception as error:  # any failure to reach the database means "not ready"
        log.warning("readiness check failed: %s", error)
        return _not_ready("database unreachable")
    if current != heads:
        return _not_ready(
            f"schema at {sorted(current) or 'nothing'}, head is {sorted(heads)}; "
            "run `jobmatch db upgrade`"
        )
    return JSONResponse({"status": "ready", "schema": sorted(current)})


def _not_ready(detail: str) -> JSONResponse:
    return JSONResponse(
        {
            "type": "about:blank",
            "title": "Service Unavailable",
            "status": 503,
            "detail": detail,
            "instance": "/readyz",
        },
        status_code=503,
        media_type="application/problem+json",
        headers={"Retry-After": "5"},
    )
