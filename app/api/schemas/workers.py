"""Bodies of the worker routes: registration, queues, heartbeats and metadata."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.common import (
    PATTERN_WORDS,
    BodyInt,
    ChangedAt,
    RegisteredAt,
    Text,
    WorkerNameField,
)
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
    """One queue instance of the worker: a queue's name and its slots on this worker."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "all.q", "slots": 4}]}
    )

    name: str = Field(
        min_length=1, max_length=255, pattern=NAME_PATTERN, description="the queue's name"
    )
    slots: BodyInt = Field(ge=0, le=1_000_000, description="slots of the queue on this worker")


WorkerName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        pattern=NAME_PATTERN,
        description="the worker's name, also its host name for Grid Engine values",
    ),
]
Resources = Annotated[
    Text,
    Field(
        max_length=65_536, description="Momotor resource definition, e.g. `language: java, ?python`"
    ),
]
Slots = Annotated[
    BodyInt, Field(ge=0, le=1_000_000, description="slots of the `default` queue (no `queues`)")
]
Rank = Annotated[BodyInt, Field(ge=0, le=2**31 - 1, description="RFC 31 rank, unique per worker")]
Queues = Annotated[
    list[QueueIn],
    Field(
        max_length=256,
        description="the worker's queue instances; without them one `default` queue",
    ),
]
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

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                # Momotor tags: the Momotor documentation's worker (app/matching/demo.py).
                {
                    "name": "w1",
                    "resources": "language: ?java, ?python; java: ?8, ?11, ?12, ?13; "
                    "python: ?3.6, ?3.7",
                    "slots": 2,
                },
                # Flux: a node with a rank, properties and an inventory.
                {
                    "name": "node0",
                    "rank": 0,
                    "properties": ["ssd"],
                    "slots": 8,
                    "inventory": "node/[socket=2/[core=16;gpu=2];memory=256{unit:GB}]",
                },
                # Grid Engine: an execution host with two queue instances.
                {
                    "name": "exec1",
                    "queues": [{"name": "all.q", "slots": 4}, {"name": "long.q", "slots": 2}],
                },
            ]
        },
    )

    name: WorkerName
    resources: Resources = ""
    slots: Slots = 1
    rank: Rank | None = Field(default=None, description="RFC 31 rank, unique per worker")
    state: WorkerState = Field(
        default=WorkerState.ACTIVE,
        description="`active` receives work; `draining` finishes what it runs and gets "
        "nothing new; `offline` and `disabled` neither (`unknown` is the server's, for a "
        "worker not heard from for JOBMATCH_WORKER_TIMEOUT_SECONDS)",
    )
    queues: Queues | None = Field(
        default=None, description="the worker's queue instances; without them one `default` queue"
    )
    properties: Properties = Field(default_factory=list)
    inventory: Inventory | None = Field(
        default=None,
        description="the worker's resources as a shape or an RFC 14 resources list",
    )


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
        json_schema_extra={
            "examples": [
                {"state": "draining", "reason": "kernel upgrade"},
                {"state": "active"},
                {"slots": 4, "properties": ["ssd", "gpu"]},
            ]
        },
    )

    state: WorkerState | None = Field(
        default=None,
        description="`draining`, `disabled` or `active` (resume); left out, it stays",
    )
    reason: Reason | None = Field(
        default=None, description="why the worker is in its state, for people; null clears it"
    )
    resources: Resources | None = Field(
        default=None, description="Momotor resource definition; replaces the old one"
    )
    slots: Slots | None = Field(
        default=None, description="slots of the worker's one `default` queue instance"
    )
    rank: Rank | None = Field(default=None, description="RFC 31 rank; null clears it")
    queues: Queues | None = Field(
        default=None, description="the worker's queue instances; replace the old ones"
    )
    properties: Properties | None = Field(
        default=None, description="RFC 31 properties; replace the old ones"
    )
    inventory: Inventory | None = Field(
        default=None, description="a shape or an RFC 14 resources list; null removes it"
    )

    @model_validator(mode="after")
    def _null_only_where_it_means_none(self) -> WorkerPatch:
        for name in _NOT_NULLABLE:
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; leave it out to keep it")
        return self


class QueueInstanceOut(BaseModel):
    queue: str = Field(description="the queue's name")
    slots: int = Field(description="slots of the queue on this worker")
    used_slots: int = Field(description="slots its running jobs hold")


class WorkerOut(BaseModel):
    name: WorkerNameField
    rank: int | None = Field(description="RFC 31 rank, if given")
    state: WorkerState = Field(
        description="whether it receives work; `unknown`: set by the server, the worker was "
        "not heard from for JOBMATCH_WORKER_TIMEOUT_SECONDS, and its next word makes it "
        "`active` again"
    )
    state_reason: str | None = Field(description="why the worker is in its state, if said")
    state_set_by: str | None = Field(
        description="who set the state: `admin`, or the subject of the token (the worker "
        "itself when its word ended `unknown`), or `jobmatch` when the server marked it "
        "`unknown`"
    )
    state_changed_at: datetime | None = Field(description="when the state was last set")
    generation: int = Field(
        description="bumped by every change of what the worker fits (its misfit rows are rewritten)"
    )
    resources: str = Field(description="the Momotor resource definition as given")
    properties: list[str] = Field(description="RFC 31 properties, by name")
    inventory: str | None = Field(description="the inventory as given (shape or JSON text)")
    free: dict[str, int] = Field(
        description="free units per resource type (`type` or `type:unit` for pools)"
    )
    queues: list[QueueInstanceOut] = Field(description="its queue instances, in queue order")
    last_seen: datetime | None = Field(
        description="when it was last heard from: a pull, finish, return, heartbeat, load "
        "or metadata report"
    )
    created_at: RegisteredAt
    updated_at: ChangedAt


class RegisteredWorker(WorkerOut):
    token: str | None = Field(
        description="the worker's new bearer token (shown once): issued when the worker is "
        "created, and when a replacement finds it without a token that works; null when "
        "`token_kept` is true"
    )
    token_kept: bool = Field(
        description="true when this registration replaced an existing worker that keeps "
        "the token it has (one neither revoked nor expired): `token` is then null and the "
        "worker goes on with its token (issue another with POST /v1/tokens)"
    )


class HeartbeatOut(BaseModel):
    worker: WorkerNameField
    last_seen: datetime | None = Field(description="the time the heartbeat was recorded")
    refresh_metadata: bool = Field(description="the worker should report its metadata again")


class StaticMetadataIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"metadata": {"system:cpu_count": 8, "tasks_denylist": ["shell"]}}]
        },
    )

    metadata: dict[str, Any] = Field(
        description='flat keys, e.g. `{"system:cpu_count": 8, "tasks_denylist": '
        '["sbuild"]}`; replaces the whole static metadata'
    )


class DynamicMetadataIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "metadata": {
                        "system": {"version": 1, "cpu_count": 8, "architecture": "amd64"},
                        "sbuild": {"version": 1, "chroots": ["trixie", "bookworm"]},
                    }
                }
            ]
        },
    )

    metadata: dict[str, Any] = Field(
        description="namespaced by task name, each with an integer version (1 by default), "
        'e.g. `{"sbuild": {"version": 2, "chroots": ["trixie"]}}`'
    )


class NamespaceOut(BaseModel):
    version: int = Field(description="the version the worker reported for this task")
    reported_at: datetime = Field(description="when it reported this namespace")


class MetadataOut(BaseModel):
    worker: WorkerNameField
    generation: int = Field(description="the worker's generation (see WorkerOut)")
    static: dict[str, Any] = Field(description="flat keys set by the administrator")
    dynamic: dict[str, Any] = Field(description="flat keys of the latest report")
    effective: dict[str, Any] = Field(description="dynamic overlaid by static")
    namespaces: dict[str, NamespaceOut] = Field(
        description="per task name of the latest report, its version and report time"
    )
    reported_at: datetime | None = Field(description="when the worker last reported")
    refresh_metadata: bool = Field(description="a refresh is due")
