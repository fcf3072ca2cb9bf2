"""Liveness and readiness probes; open to unauthenticated callers, as probes are."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app import __version__
from app.api.deps import DatabaseDep
from app.api.schemas.common import Problem
from app.db.schema_state import read_schema_state

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


@router.get("/healthz", operation_id="check_health", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    """`{"status": "ok", "version": ...}` whenever the process can answer at all; it
    touches neither the database nor anything else, so a liveness probe restarts only a
    process that is really stuck. Answered on the event loop: with the thread pool busy
    (a burst of pulls, say) the process still answers."""
    return {"status": "ok", "version": __version__}


@router.get(
    "/readyz",
    operation_id="check_readiness",
    summary="Readiness: the database answers and its schema is at the migration head",
    responses={
        200: {"description": 'Ready: `{"status": "ready", "schema": [revisions]}`'},
        503: {
            "model": Problem,
            "description": "Database unreachable or schema not at the migration head; "
            "retry after the `Retry-After` seconds",
        },
    },
)
def readyz(database: DatabaseDep) -> JSONResponse:
    """200 when the database answers and its schema is at the migration head, so a load
    balancer sends traffic only to a server that can serve it; 503 (with `Retry-After`)
    otherwise, saying which."""
    try:
        database.ping()
        state = read_schema_state(database.engine)
    except Exception as error:  # any failure to reach the database means "not ready"
        log.warning("readiness check failed: %s", error)
        return _not_ready("database unreachable")
    if not state.at_head:
        # The words of the schema gate's 503 (app/api/schema_gate.py).
        return _not_ready(state.describe())
    return JSONResponse({"status": "ready", "schema": sorted(state.current)})


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
