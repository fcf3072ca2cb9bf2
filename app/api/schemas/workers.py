"""Bodies of the worker routes: registration, queues, heartbeats and metadata."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Text
from app.db.models import (
    WorkerState,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"


class QueueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=NAME_PATTERN)
    slots: int = Field(ge=0, le=1_000_000)


class WorkerIn(BaseModel):
    """A worker's registration. Without ``queues`` the worker gets one queue instance of
    the ``default`` queue with ``slots`` slots."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=NAME_PATTERN)
    resources: Text = Field(
        default="",
        max_length=65_536,
        description="Momotor resource definition, e.g. `language: java, ?python`",
    )
    slots: int = Field(default=1, ge=0, le=1_000_000)
    rank: int | None = Field(default=None, ge=0, le=2**31 - 1)
    state: WorkerState = WorkerState.ACTIVE
    queues: list[QueueIn] | None = Field(default=None, max_length=256)
    properties: list[
        Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00\^!&'\"`|()]+$")]
    ] = Field(
        default_factory=list,
        max_length=1024,
        description="RFC 31 properties, tested by `properties` constraints",
    )
    inventory: str | list[Any] | None = Field(
        default=None,
        description="the worker's resources as a shape (`node/[socket=2/[core=16;gpu=2];"
        "memory=256{unit:GB}]`) or an RFC 14 resources list; jobs with a shape or jobspec "
        "get concrete vertices of it",
    )


class QueueInstanceOut(BaseModel):
    queue: str
    slots: int
    used_slots: int


class WorkerOut(BaseModel):
    name: str
    rank: int | None
    state: WorkerState
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
