"""Bodies of the Grid Engine routes: attributes, values, parallel environments and the
scheduling run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import BodyFloat, BodyInt, Name
from app.matching.gridengine.admin import VALUE_KINDS

#: Most attributes one request may set per kind of value (the default table has 51).
MAX_VALUES = 1024


class AttributeIn(BaseModel):
    """One ``qconf -sc`` row."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                # A license counted per slot: `lic lic INT <= YES YES 0 0` in qconf -sc.
                {
                    "name": "lic",
                    "shortcut": "lic",
                    "type": "INT",
                    "relop": "<=",
                    "requestable": "YES",
                    "consumable": "YES",
                    "default": "0",
                    "urgency": 0,
                }
            ]
        },
    )

    name: Name = Field(description="the attribute's name, e.g. `h_vmem`")
    shortcut: Name = Field(description="its short name in -l lists, e.g. `h_vmem` or `lic`")
    type: str = Field(description="INT DOUBLE MEMORY TIME BOOL STRING CSTRING RESTRING HOST")
    relop: str = Field(description="== != <= < >= > EXCL")
    requestable: str = Field(default="YES", description="YES, NO or FORCED")
    consumable: str = Field(default="NO", description="NO, YES (per slot) or JOB")
    default: str = Field(
        default="0",
        max_length=255,
        description="for a consumable, what a job that does not request it books",
    )
    urgency: BodyFloat = Field(default=0.0, description="the urgency of a job that requests it")


class AttributeOut(AttributeIn):
    # Not AttributeIn's examples, which lack `builtin`.
    model_config = ConfigDict(json_schema_extra=None)

    builtin: bool = Field(description="one of Grid Engine's default table; it cannot be deleted")


class ValuesIn(BaseModel):
    """Each list given replaces that kind of values of the object; omitted ones stay."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                # PUT /v1/values/global: 4 licenses for the whole cluster.
                {"complex_values": {"lic": "4"}},
                # PUT /v1/values/hosts/{host}: memory capacity and the host's architecture.
                {"complex_values": {"h_vmem": "8G"}, "load_values": {"arch": "lx-amd64"}},
                # PUT /v1/values/queues/{queue}/{host}: the queue instance's run-time limit.
                {"attributes": {"h_rt": "3600"}},
            ]
        },
    )

    complex_values: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="fixed values; for consumables, their capacities",
    )
    load_values: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="load values set by the administrator (global and host level); they "
        "replace the administrator's earlier ones only, never the worker's reported ones, "
        "and matching sees them instead of a reported value of the same attribute",
    )
    attributes: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_VALUES,
        description="built-in queue attributes such as h_rt or h_vmem (queue instances "
        "only): they override the built-ins they name and replace the administrator's "
        "earlier overrides; every built-in they do not name keeps the value the queue "
        "instance was created with (qname and hostname always)",
    )

    def by_kind(self) -> dict[str, dict[str, str] | None]:
        """Each kind of values (:data:`VALUE_KINDS`) as the body gives it, None where it
        leaves the kind as it is: what the services apply."""
        return {kind: getattr(self, kind) for kind in VALUE_KINDS}


class ConsumptionOut(BaseModel):
    capacity: float = Field(description="the consumable's capacity at this object")
    used: float = Field(description="what running jobs book of it now")


class ValuesRead(BaseModel):
    """The values one object carries, by attribute name, as PUT writes them; built-in
    queue attributes include those every queue instance gets (qname, hostname, limits)."""

    complex_values: dict[str, str] = Field(description="fixed values and capacities")
    load_values: dict[str, str] = Field(
        description="load values an administrator set (`PUT /v1/values/...`)"
    )
    reported_load_values: dict[str, str] = Field(
        description="the worker's own latest load report (`PUT /v1/workers/{name}/load`); "
        "a report replaces these only, and an administrator's load value of the same "
        "attribute hides the reported one"
    )
    attributes: dict[str, str] = Field(description="built-in queue attributes")
    consumables: dict[str, ConsumptionOut] = Field(
        description="consumables with a capacity here, and what is booked of them"
    )
    matching_uses: dict[str, list[str]] = Field(
        description="per attribute, the fields above whose values matching sees here: for "
        "relops == and != the first of complex_values, attributes, load_values, "
        "reported_load_values; for the others each of them (the most restrictive decides), "
        "except a reported load value an administrator's load value hides"
    )


class LoadValuesIn(BaseModel):
    """A worker's own load report (what Grid Engine's execd sends its qmaster)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"load_values": {"load_avg": "0.42", "np_load_avg": "0.21", "num_proc": "2"}}
            ]
        },
    )

    load_values: dict[str, str] = Field(
        max_length=MAX_VALUES, description="load values by attribute name, e.g. load_avg"
    )


class ValuesOut(BaseModel):
    static_changed: bool = Field(description="whether the misfit cache was recomputed")


class PeIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"allocation_rule": "$fill_up", "slots": 64}]},
    )

    allocation_rule: str = Field(description="$pe_slots, $fill_up, $round_robin or a number")
    slots: BodyInt = Field(
        default=999_999,
        ge=0,
        le=9_999_999,
        description="the most slots its jobs may hold at once, over all hosts",
    )


class PeOut(PeIn):
    model_config = ConfigDict(json_schema_extra=None)

    name: str = Field(description="the parallel environment's name")


class ScheduleOut(BaseModel):
    considered: int = Field(description="waiting jobs the run looked at")
    dispatched: int = Field(description="jobs it started")
    rejected_categories: int = Field(
        description="categories none of whose jobs could be placed in this run"
    )
