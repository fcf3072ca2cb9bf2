"""Bodies of the worker routes: registration, queues, heartbeats and metadata."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.common import PATTERN_WORDS, Text
from app.db.models import (
    WorkerState,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
#: An RFC 31 property name: no NUL and none of the characters RFC 35 gives a meaning.
PROPERTY_PATTERN = r"^[^\x00\^!&'\"`|()]+$"
PATTERN_WORDS[NAME_PATTERN] = (
    "a name of letters, digits and '.', '_', ':', '@', '-' that starts with a letter or a digit"
)
PATTERN_WORDS[PROPERTY_PATTERN] = "a property name without NUL or any of ^ ! & ' \" ` | ( )"


class QueueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=NAME_PATTERN)
    slots: int = Field(ge=0, le=1_000_000)


WorkerName = Annotated[str, Field(min_length=1, max_length=255, pattern=NAME_PATTERN)]
Resources = Annotated[
    Text,
    Field(
        max_length=65_536, description="Momotor resource definition, e.g. `language: java, ?python`"
    ),
]
Slots = Annotated[int, Field(ge=0, le=1_000_000)]
Rank = Annotated[int, Field(ge=0, le=2**31 - 1, description="RFC 31 rank, unique per worker")]
Queues = Annotated[list[QueueIn], Field(max_length=256)]
Properties = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=255, pattern=PROPERTY_PATTERN)]],
    Field(max_length=1024, description="RFC 31 properties, tested by `properties` constraints"),
]
Inventory = Annotated[
    str | list[Any],
    Field(
        description="the worker's resources as a shape (`node/[socket=2/[core=16;gpu=2];"
        "memory=256{unit:GB}]`) or an RFC 14 resources list; jobs with a shape or jobspec "
        "get concrete vertices of it"
    ),
]
Reason = Annotated[
    Text, Field(max_length=1024, description="why the worker is in its state, for people")
]


class WorkerIn(BaseModel):
    """A worker's registration. Without ``queues`` the worker gets one queue instance of
    the ``default`` queue with ``slots`` slots."""

    model_config = ConfigDict(extra="forbid")

    name: WorkerName
    resources: Resources = ""
    slots: Slots = 1
    rank: Rank | None = None
    state: WorkerState = WorkerState.ACTIVE
    queues: Queues | None = None
    properties: Properties = Field(default_factory=list)
    inventory: Inventory | None = None


#: Fields of a patch that have no "none" value: ``null`` for them is an error, not a reset.
_NOT_NULLABLE = ("state", "resources", "slots", "queues", "properties")


class WorkerPatch(BaseModel):
    """A change of some of a worker's fields (JSON merge patch, RFC 7396): a field left out
    stays as it is; ``null`` clears ``rank``, ``inventory`` or ``reason``. ``state`` with a
    ``reason`` drains (``draining``: finishes what it runs, gets nothing new), disables
    (``disabled``: gets nothing, and counts as able to run nothing) or resumes
    (``active``) the worker; a change of state without a reason clears the old one."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"state": "draining", "reason": "kernel upgrade"}},
    )

    state: WorkerState | None = None
    reason: Reason | None = None
    resources: Resources | None = None
    slots: Slots | None = Field(
        default=None, description="slots of the worker's one `default` queue instance"
    )
    rank: Rank | None = None
    queues: Queues | None = None
    properties: Properties | None = None
    inventory: Inventory | None = None

    @model_validator(mode="after")
    def _null_only_where_it_means_none(self) -> WorkerPatch:
        for name in _NOT_NULLABLE:
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; leave it out to keep it")
        return self


class QueueInstanceOut(BaseModel):
    queue: str
    slots: int
    used_slots: int


class WorkerOut(BaseModel):
    name: str
    rank: int | None
    state: WorkerState
    state_reason: str | None = Field(description="why the worker is in its state, if said")
    state_set_by: str | None = Field(
        description="who set the state: `admin`, or the subject of the token"
    )
    state_changed_at: datetime | None = Field(description="when the state was last set")
    generation: int
    resources: str
    properties: list[str]
    inventory: str | None = Field(description="the inventory as given (shape or JSON text)")
    free: dict[str, int] = Field(
        description="free units per resource type (`type` or `type:unit` for pools)"
    )
    queues: list[QueueInstanceOut]
    last_seen: datetime | None
    created_at: datetime
    updated_at: datetime


class RegisteredWorker(WorkerOut):
    token: str | None = Field(
        description="the worker's bearer token, issued when the worker is created; null on "
        "an update (issue another with POST /v1/tokens)"
    )


class HeartbeatOut(BaseModel):
    worker: str
    last_seen: datetime | None
    refresh_metadata: bool = Field(description="the worker should report its metadata again")


class StaticMetadataIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(
        description='flat keys, e.g. `{"system:cpu_count": 8, "tasks_denylist": '
        '["sbuild"]}`; replaces the whole static metadata'
    )


class DynamicMetadataIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(
        description="namespaced by task name, each with an integer version (1 by default), "
        'e.g. `{"sbuild": {"version": 2, "chroots": ["trixie"]}}`'
    )


class NamespaceOut(BaseModel):
    version: int
    reported_at: datetime


class MetadataOut(BaseModel):
    worker: str
    generation: int
    static: dict[str, Any]
    dynamic: dict[str, Any] = Field(description="flat keys of the latest report")
    effective: dict[str, Any] = Field(description="dynamic overlaid by static")
    namespaces: dict[str, NamespaceOut]
    reported_at: datetime | None = Field(description="when the worker last reported")
    refresh_metadata: bool = Field(description="a refresh is due")
