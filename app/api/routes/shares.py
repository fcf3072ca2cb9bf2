"""Fair share between submitters (docs/ordering.md): the usage and shares the pull
orders by, and the weights an administrator sets."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath
from app.api.schemas.shares import SharesOut, StandingOut, WeightIn
from app.matching.ordering import policy, shares

router = APIRouter(prefix="/v1", tags=["fair share"], route_class=RetryingRoute)


@router.get(
    "/shares",
    operation_id="list_shares",
    summary="Usage against share per submitter",
    responses=errors(401, 403, 503),
)
def list_shares(session: SessionDep, _admin: AdminDep) -> SharesOut:
    """Every submitter's weight, share and usage (slot-seconds, decayed to now), furthest
    below its share first: the order in which fair share gives them the next job."""
    ordering = policy.active()
    return SharesOut(
        ordering=ordering.text(),
        fair_share=ordering.fair_share,
        halflife_seconds=ordering.halflife_seconds,
        submitters=[
            StandingOut(**vars(standing), below_share=standing.below_share)
            for standing in shares.standings(session, ordering.halflife_seconds)
        ],
    )


@router.put(
    "/shares/{submitter}",
    operation_id="set_share_weight",
    summary="Set a submitter's weight",
    responses=errors(401, 403, 503, *BODY_ERRORS),
)
def set_share_weight(
    submitter: NamePath, body: WeightIn, session: SessionDep, _admin: AdminDep
) -> StandingOut:
    """Give a submitter a weight (1 by default); its share is its weight over every
    submitter's. 422 for a weight that is not a number above 0."""
    ordering = policy.active()
    shares.set_weight(session, submitter, body.weight)
    standing = shares.standing_of(session, submitter, ordering.halflife_seconds)
    assert standing is not None  # its row was just made
    return StandingOut(**vars(standing), below_share=standing.below_share)
