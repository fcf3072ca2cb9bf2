"""Bodies of the host group, access list and project routes (``qconf -ahgrp``/``-au``/
``-aprj`` and their show, modify and delete forms)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import PATTERN_WORDS

#: A host group's name in a path: ``@`` and a name (hostgroup(5)).
HOST_GROUP_PATTERN = r"^@[A-Za-z0-9_.-]+$"
PATTERN_WORDS[HOST_GROUP_PATTERN] = (
    "'@' and a name of letters, digits, '_', '.', '-' (a host group, hostgroup(5))"
)
HostGroupPath = Annotated[
    str,
    Path(
        min_length=2,
        max_length=256,
        pattern=HOST_GROUP_PATTERN,
        description="a host group's name with its `@`, e.g. `@linux`",
    ),
]

#: Members one host group or access list may hold in a body (the service checks the
#: same bound, app/notations/gridengine/groups.py).
MAX_MEMBERS = 10_000
#: Names are checked by the service, so that a bad one is a 422 naming the notation; the
#: schema only bounds their length.
_NAME = Field(min_length=1, max_length=256)


class HostGroupIn(BaseModel):
    """A host group as ``qconf -ahgrp`` reads it: ``group_name`` and ``hostlist``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "@linux", "members": ["h1", "h2", "@gpu"]}]},
    )

    name: str = Field(
        min_length=1, max_length=256, description="the group's name with its `@`, e.g. `@linux`"
    )
    members: list[str] = Field(
        max_length=MAX_MEMBERS,
        description="hosts and `@group` sub-groups (which must exist; no cycle)",
    )


class MembersIn(BaseModel):
    """A host group's or access list's new members (``qconf -mhgrp``, ``-mu``)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"members": ["h1", "h3"]}]}
    )

    members: list[str] = Field(max_length=MAX_MEMBERS, description="the members, in order")


class HostGroupOut(BaseModel):
    name: str = Field(description="the group's name with its `@`")
    members: list[str] = Field(description="its hostlist as given: hosts and `@group`s")
    hosts: list[str] = Field(description="every host it holds, sub-groups resolved, sorted")


class AccessListIn(BaseModel):
    """A user access list (access_list(5)): its name and the users in it."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "staff", "members": ["alice"]}]}
    )

    name: str = Field(min_length=1, max_length=255, description="the list's name, without `@`")
    members: list[str] = Field(max_length=MAX_MEMBERS, description="the users in it")


class AccessListOut(BaseModel):
    name: str = Field(description="the list's name (quota filters write it `@name`)")
    members: list[str] = Field(description="its users, in order")


class ProjectIn(BaseModel):
    """A project (project(5)) jobs may name with ``qsub -P``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "p1"}]})

    name: str = Field(min_length=1, max_length=255, description="the project's name")


class ProjectOut(BaseModel):
    name: str = Field(description="the project's name")
