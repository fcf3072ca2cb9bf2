"""Fair share between submitters and groups of submitters (docs/ordering.md): the usage
and shares the pull orders by, and the weights and groups an administrator sets."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath
from app.api.schemas.shares import (
    GroupStandingOut,
    GroupWeightIn,
    SharesOut,
    StandingOut,
    WeightIn,
)
from app.matching.ordering import policy, shares

router = APIRouter(prefix="/v1", tags=["fair share"], route_class=RetryingRoute)


@router.get(
    "/shares",
    operation_id="list_shares",
    summary="Usage against share per submitter",
    responses=errors(401, 403, 503),
)
def list_shares(session: SessionDep, _admin: AdminDep) -> SharesOut:
    """Every submitter's weight, group, share and usage (slot-seconds, decayed to now),
    in the order in which fair share gives them the next job (under group-share, by
    their group's standing first); and every group's, furthest below its share first."""
    ordering = policy.active()
    halflife = ordering.halflife_seconds
    return SharesOut(
        ordering=ordering.text(),
        fair_share=ordering.fair_share,
        halflife_seconds=halflife,
        submitters=[
            StandingOut(**vars(standing), below_share=standing.below_share)
            for standing in shares.standings(session, halflife, by_group=ordering.group_share)
        ],
        groups=[_group_out(group) for group in shares.group_standings(session, halflife)],
    )


def _group_out(group: shares.GroupStanding) -> GroupStandingOut:
    return GroupStandingOut(
        **{**vars(group), "members": list(group.members)}, below_share=group.below_share
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
    submitter's. ``group`` puts it in a group (made with weight 1 if it has no row;
    the submitter takes its usage along), ``null`` in none; left out, it stays in the
    one it is in. 422 for a weight that is not a number above 0 or a group that is not
    a name."""
    ordering = policy.active()
    shares.set_weight(session, submitter, body.weight)
    if "group" in body.model_fields_set:
        shares.set_group(session, submitter, body.group, ordering.halflife_seconds)
    standing = shares.standing_of(session, submitter, ordering.halflife_seconds)
    assert standing is not None  # its row was just made
    return StandingOut(**vars(standing), below_share=standing.below_share)


@router.put(
    "/groups/{name}",
    operation_id="set_group_weight",
    summary="Set a group's weight",
    responses=errors(401, 403, 503, *BODY_ERRORS),
)
def set_group_weight(
    name: NamePath, body: GroupWeightIn, session: SessionDep, _admin: AdminDep
) -> GroupStandingOut:
    """Give a group of submitters a weight (1 by default; the group is made if it has no
    row); its share is its weight over every group's, a submitter without a group
    counting as a group of its own. 422 for a weight that is not a number above 0."""
    ordering = policy.active()
    shares.set_group_weight(session, name, body.weight)
    standing = shares.group_standing_of(session, name, ordering.halflife_seconds)
    assert standing is not None  # its row was just made
    return _group_out(standing)
