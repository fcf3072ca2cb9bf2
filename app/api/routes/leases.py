"""Admin endpoint to expire leases now (the server also does it in the background)."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.responses import errors
from app.api.retries import RetryingRoute
from app.api.schemas.leases import ExpireOut
from app.matching.leases import expire_leases

router = APIRouter(prefix="/v1/leases", tags=["leases"], route_class=RetryingRoute)


@router.post(
    "/expire",
    operation_id="expire_leases",
    summary="Expire the leases of silent workers now",
    responses=errors(401, 403, 503),
)
def expire(request: Request, session: SessionDep, _admin: AdminDep) -> ExpireOut:
    """Requeue (or fail, past the attempt limit) the running jobs of workers silent for
    longer than the lease, as the background sweep does."""
    settings = request.app.state.settings
    expired = expire_leases(
        session, lease=timedelta(seconds=settings.lease_seconds), max_attempts=settings.max_attempts
    )
    return ExpireOut(expired=len(expired))
