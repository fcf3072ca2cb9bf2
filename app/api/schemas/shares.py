"""Bodies of the fair-share routes (docs/ordering.md): each submitter's weight, share and
decayed usage, and a weight to set."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

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
    """A submitter's weight: its share is its weight over every submitter's."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"weight": 2}]})

    weight: Weight


class StandingOut(BaseModel):
    submitter: str = Field(description="who submitted the jobs")
    weight: float = Field(description="its weight (1 unless set)")
    share: float = Field(description="its weight over every submitter's, from 0 to 1")
    usage: float = Field(description="slot-seconds used, decayed to now with the half-life")
    usage_fraction: float = Field(description="its usage over everybody's, from 0 to 1")
    below_share: bool = Field(description="whether its usage fraction is below its share")


class SharesOut(BaseModel):
    ordering: str = Field(description="the deployment's ordering rules, best first")
    fair_share: bool = Field(description="whether the pull orders by fair share")
    halflife_seconds: float = Field(description="seconds in which usage decays to half")
    submitters: list[StandingOut] = Field(
        description="every submitter with a row, furthest below its share first"
    )
