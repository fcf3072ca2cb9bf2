"""Bodies of the cluster queue routes (queue_conf(5) attributes jobmatch models)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import BodyInt, Text


class QueueConfIn(BaseModel):
    """What an admin sets of a cluster queue (``qconf -mattr queue ...``): a field left
    out stays as it is."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"load_thresholds": "np_load_avg=1.75,mem_free=1G"}, {"seq_no": 10}]
        },
    )

    seq_no: BodyInt | None = Field(
        default=None,
        ge=0,
        le=2_147_483_647,
        description="queue_conf(5) seq_no: queue order, lower first (instances without "
        "their own take it)",
    )
    load_thresholds: Text | None = Field(
        default=None,
        max_length=65_536,
        description=(
            "queue_conf(5) load_thresholds: `name=value` load value thresholds separated by "
            "commas, `NONE` (or empty) for none; an instance whose host exceeds one takes "
            "no new job"
        ),
    )


class QueueConfOut(BaseModel):
    """A cluster queue: its name, its place in the queue order and its thresholds."""

    name: str = Field(description="the cluster queue's name")
    seq_no: int = Field(description="queue order: lower first (queue_conf(5) seq_no)")
    load_thresholds: str = Field(description="its load thresholds, `NONE` for none")


class QueueInstanceConfIn(BaseModel):
    """A change of a queue instance (JSON merge patch, RFC 7396): a field left out stays;
    ``null`` clears a per-host value (the cluster queue's applies again)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"disabled": True}, {"suspended": False}, {"seq_no": 1}, {"seq_no": None}]
        },
    )

    disabled: bool | None = Field(
        default=None, description="`qmod -d` (true) / `qmod -e` (false): takes no new job"
    )
    suspended: bool | None = Field(
        default=None, description="`qmod -s` (true) / `qmod -us` (false): takes no new job"
    )
    seq_no: BodyInt | None = Field(
        default=None,
        ge=0,
        le=2_147_483_647,
        description="the instance's own seq_no (`seq_no 0,[host=1]`); null: the queue's",
    )
    load_thresholds: Text | None = Field(
        default=None,
        max_length=65_536,
        description="the instance's own load_thresholds (`NONE` for none); null: the queue's",
    )


class QueueInstanceConfOut(BaseModel):
    """A queue instance: its states and its values, own and effective."""

    name: str = Field(description="`queue@host`")
    slots: int = Field(description="its slots")
    used_slots: int = Field(description="slots running jobs hold")
    disabled: bool = Field(description="disabled (`qmod -d`, qstat state d)")
    suspended: bool = Field(description="suspended (`qmod -s`, qstat state s)")
    own_seq_no: int | None = Field(description="its own seq_no, null: the queue's")
    seq_no: int = Field(description="the seq_no it sorts by")
    own_load_thresholds: str | None = Field(description="its own thresholds, null: the queue's")
    load_thresholds: str = Field(description="the thresholds it is checked against")


class SchedulerConfIn(BaseModel):
    """The scheduler configuration jobmatch models (``qconf -msconf``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"queue_sort_method": "load", "load_formula": "np_load_avg"}]
        },
    )

    queue_sort_method: Literal["load", "seqno"] = Field(
        description="sched_conf(5): `load` sorts queue instances by their host's load "
        "formula value, then seq_no; `seqno` by seq_no, then the value"
    )
    load_formula: Text = Field(
        default="np_load_avg",
        max_length=4096,
        description="sched_conf(5) load_formula: `{w1|load_val1[*w1]}[{+|-}...]`, no blanks",
    )


class SchedulerConfOut(BaseModel):
    """The stored configuration; ``configured`` false: none is stored and queue instances
    sort by seq_no, then creation."""

    configured: bool = Field(description="whether a configuration is stored")
    queue_sort_method: str | None = Field(description="`load` or `seqno`; null when none")
    load_formula: str | None = Field(description="the formula as stored; null when none")
