"""Bodies of the fair-share routes (docs/ordering.md): each submitter's weight, group,
share and decayed usage, each group's likewise, and the weights and groups to set."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Name
from app.matching.ordering.shares import MAX_WEIGHT

#: A fair-share weight, wherever a body sets one (here and in a what-if).
Weight = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_WEIGHT,
        allow_inf_nan=False,
        description="the submitter's weight (1 by default); its share is its weight over all",
    ),
]


class WeightIn(BaseModel):
    """A submitter's weight: its share is its weight over every submitter's; and, when
    given, its group (``null``: none)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"weight": 2}, {"weight": 1, "group": "course-a"}]},
    )

    weight: Weight
    group: Name | None = Field(
        default=None,
        description="the group it belongs to (made with weight 1 if new); null: none; "
        "left out: the group it is in",
    )


class GroupWeightIn(BaseModel):
    """A group's weight: its share is its weight over every group's."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"weight": 2}]})

    weight: Weight


class StandingOut(BaseModel):
    submitter: str = Field(description="who submitted the jobs")
    weight: float = Field(description="its weight (1 unless set)")
    share: float = Field(description="its weight over every submitter's, from 0 to 1")
    usage: float = Field(description="slot-seconds used, decayed to now with the half-life")
    usage_fraction: float = Field(description="its usage over everybody's, from 0 to 1")
    below_share: bool = Field(description="whether its usage fraction is below its share")
    group: str | None = Field(description="the group it belongs to; null: a group of its own")


class GroupStandingOut(BaseModel):
    group: str | None = Field(
        description="the group's name; null: a submitter without a group, a group of its own"
    )
    members: list[str] = Field(description="the submitters in it")
    weight: float = Field(description="its weight (1 unless set; a lone submitter's own)")
    share: float = Field(description="its weight over every group's, from 0 to 1")
    usage: float = Field(description="its members' slot-seconds, decayed to now")
    usage_fraction: float = Field(description="its usage over everybody's, from 0 to 1")
    below_share: bool = Field(description="whether its usage fraction is below its share")


class SharesOut(BaseModel):
    ordering: str = Field(description="the deployment's ordering rules, best first")
    fair_share: bool = Field(
        description="whether the pull orders by usage against shares (fair-share or group-share)"
    )
    halflife_seconds: float = Field(description="seconds in which usage decays to half")
    submitters: list[StandingOut] = Field(
        description="every submitter with a row, in the order the pull gives them the "
        "next job (by group first under group-share)"
    )
    groups: list[GroupStandingOut] = Field(
        description="every group, and every submitter without one as a group of its own, "
        "furthest below its share first"
    )
