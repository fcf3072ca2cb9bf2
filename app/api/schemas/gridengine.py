"""Bodies of the Grid Engine routes: attributes, values, parallel environments and the
scheduling run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import MAX_NAME_LENGTH, NAME_PATTERN

#: Most attributes one request may set per kind of value (the default table has 51).
MAX_VALUES = 1024


class AttributeIn(BaseModel):
    """One ``qconf -sc`` row."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)
    shortcut: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)
    type: str = Field(description="INT DOUBLE MEMORY TIME BOOL STRING CSTRING RESTRING HOST")
    relop: str = Field(description="== != <= < >= > EXCL")
    requestable: str = Field(default="YES", description="YES, NO or FORCED")
    consumable: str = Field(default="NO", description="NO, YES (per slot) or JOB")
    default: str = Field(default="0", max_length=255)
    urgency: float = 0.0


class AttributeOut(AttributeIn):
    builtin: bool


class ValuesIn(BaseModel):
    """Each list given replaces that kind of values of the object; omitted ones stay."""

    model_config = ConfigDict(extra="forbid")

    complex_values: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="fixed values; for consumables, their capacities",
    )
    load_values: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="reported load values (global and host level)",
    )
    attributes: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="built-in queue attributes such as h_rt or h_vmem",
    )


class LoadValuesIn(BaseModel):
    """A worker's own load report (what Grid Engine's execd sends its qmaster)."""

    model_config = ConfigDict(extra="forbid")

    load_values: dict[str, str] = Field(
        max_length=MAX_VALUES, description="load values by attribute name, e.g. load_avg"
    )


class ValuesOut(BaseModel):
    static_changed: bool = Field(description="whether the misfit cache was recomputed")


class PeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allocation_rule: str = Field(description="$pe_slots, $fill_up, $round_robin or a number")
    slots: int = Field(default=999_999, ge=0, le=9_999_999)


class PeOut(PeIn):
    name: str


class ScheduleOut(BaseModel):
    considered: int
    dispatched: int
    rejected_categories: int
