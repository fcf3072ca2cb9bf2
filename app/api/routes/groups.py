"""Grid Engine host groups (``qconf -ahgrp``, ``-shgrpl``, ``-shgrp``, ``-mhgrp``,
``-dhgrp``), user access lists (``qconf -au``, ``-sul``, ``-su``, ``-mu``, ``-dul``) and
projects (``qconf -aprj``, ``-sprjl``, ``-sprj``, ``-dprj``): what ``-q`` lists and resource
quota filters name (docs/notations/gridengine.md#host-groups-access-lists-and-projects)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from fastapi import APIRouter, Response, status
from sqlalchemy.orm import Session

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.paging import Paging100Dep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath, Page
from app.api.schemas.groups import (
    AccessListIn,
    AccessListOut,
    HostGroupIn,
    HostGroupOut,
    HostGroupPath,
    MembersIn,
    ProjectIn,
    ProjectOut,
)
from app.db.models import AccessList, HostGroup, Project
from app.matching.gridengine import groups

router = APIRouter(prefix="/v1", tags=["grid engine"], route_class=RetryingRoute)


def _host_group(
    session: Session, row: HostGroup, resolved: Mapping[str, frozenset[str]] | None = None
) -> HostGroupOut:
    """The group's body; ``resolved`` (every group's hosts) saves loading them per row."""
    if resolved is None:
        resolved = groups.load_groups(session).host_groups
    return HostGroupOut(
        name=row.name,
        members=groups.host_group_members(session, row),
        hosts=sorted(resolved.get(row.name, frozenset())),
    )


def _access_list(session: Session, row: AccessList) -> AccessListOut:
    return AccessListOut(name=row.name, members=groups.access_list_members(session, row))


def _project(row: Project) -> ProjectOut:
    return ProjectOut(name=row.name)


@router.post(
    "/hostgroups",
    status_code=status.HTTP_201_CREATED,
    operation_id="create_host_group",
    summary="Create a host group",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def create_host_group(body: HostGroupIn, session: SessionDep, _admin: AdminDep) -> HostGroupOut:
    """Add a host group (``qconf -ahgrp``): its hosts and sub-groups. 409 when the name is
    taken; 422 on a bad name or member, a sub-group that does not exist, or nesting that
    would make a group contain itself."""
    return _host_group(session, groups.create_host_group(session, body.name, body.members))


@router.get(
    "/hostgroups",
    operation_id="list_host_groups",
    summary="List host groups",
    responses=errors(401, 403, 422, 503),
)
def list_host_groups(
    session: SessionDep, _admin: AdminDep, paging: Paging100Dep
) -> Page[HostGroupOut]:
    """The host groups (``qconf -shgrpl``) sorted by name, a page at a time."""
    resolved = groups.load_groups(session).host_groups
    return paging.listing(
        partial(groups.list_host_groups, session), partial(_host_group, session, resolved=resolved)
    )


@router.get(
    "/hostgroups/{name}",
    operation_id="get_host_group",
    summary="Read one host group",
    responses=errors(401, 403, 404, 422, 503),
)
def get_host_group(name: HostGroupPath, session: SessionDep, _admin: AdminDep) -> HostGroupOut:
    """A group (``qconf -shgrp``) with the hosts it resolves to."""
    return _host_group(session, groups.get_host_group(session, name))


@router.put(
    "/hostgroups/{name}",
    operation_id="replace_host_group",
    summary="Replace a host group's members",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def replace_host_group(
    name: HostGroupPath, body: MembersIn, session: SessionDep, _admin: AdminDep
) -> HostGroupOut:
    """The group's new hostlist (``qconf -mhgrp``), checked as on creation."""
    return _host_group(session, groups.replace_host_group(session, name, body.members))


@router.delete(
    "/hostgroups/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_host_group",
    summary="Delete a host group",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def delete_host_group(name: HostGroupPath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a group (``qconf -dhgrp``); 409 while another group contains it."""
    groups.delete_host_group(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/access-lists",
    status_code=status.HTTP_201_CREATED,
    operation_id="create_access_list",
    summary="Create a user access list",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def create_access_list(body: AccessListIn, session: SessionDep, _admin: AdminDep) -> AccessListOut:
    """Add an access list (``qconf -au user,... name``) that quota filters name as
    ``@name``; 409 when the name is taken, 422 on a bad name or user."""
    return _access_list(session, groups.create_access_list(session, body.name, body.members))


@router.get(
    "/access-lists",
    operation_id="list_access_lists",
    summary="List user access lists",
    responses=errors(401, 403, 422, 503),
)
def list_access_lists(
    session: SessionDep, _admin: AdminDep, paging: Paging100Dep
) -> Page[AccessListOut]:
    """The access lists (``qconf -sul``) sorted by name, a page at a time."""
    return paging.listing(
        partial(groups.list_access_lists, session), partial(_access_list, session)
    )


@router.get(
    "/access-lists/{name}",
    operation_id="get_access_list",
    summary="Read one user access list",
    responses=errors(401, 403, 404, 422, 503),
)
def get_access_list(name: NamePath, session: SessionDep, _admin: AdminDep) -> AccessListOut:
    """A list and its users (``qconf -su name``)."""
    return _access_list(session, groups.get_access_list(session, name))


@router.put(
    "/access-lists/{name}",
    operation_id="replace_access_list",
    summary="Replace a user access list's users",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def replace_access_list(
    name: NamePath, body: MembersIn, session: SessionDep, _admin: AdminDep
) -> AccessListOut:
    """The list's new users (``qconf -mu``)."""
    return _access_list(session, groups.replace_access_list(session, name, body.members))


@router.delete(
    "/access-lists/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_access_list",
    summary="Delete a user access list",
    responses=errors(401, 403, 404, 422, 503),
)
def delete_access_list(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a list (``qconf -dul``); quota filters naming it match nobody through it."""
    groups.delete_access_list(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/projects",
    status_code=status.HTTP_201_CREATED,
    operation_id="create_project",
    summary="Create a project",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def create_project(body: ProjectIn, session: SessionDep, _admin: AdminDep) -> ProjectOut:
    """Add a project (``qconf -aprj``) jobs may name (``project``, ``qsub -P``); 409 when
    the name is taken, 422 on a bad name."""
    return _project(groups.create_project(session, body.name))


@router.get(
    "/projects",
    operation_id="list_projects",
    summary="List projects",
    responses=errors(401, 403, 422, 503),
)
def list_projects(session: SessionDep, _admin: AdminDep, paging: Paging100Dep) -> Page[ProjectOut]:
    """The projects (``qconf -sprjl``) sorted by name, a page at a time."""
    return paging.listing(partial(groups.list_projects, session), _project)


@router.get(
    "/projects/{name}",
    operation_id="get_project",
    summary="Read one project",
    responses=errors(401, 403, 404, 422, 503),
)
def get_project(name: NamePath, session: SessionDep, _admin: AdminDep) -> ProjectOut:
    """A project (``qconf -sprj name``)."""
    return _project(groups.get_project(session, name))


@router.delete(
    "/projects/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="delete_project",
    summary="Delete a project",
    responses=errors(401, 403, 404, 422, 503),
)
def delete_project(name: NamePath, session: SessionDep, _admin: AdminDep) -> Response:
    """Delete a project (``qconf -dprj``); jobs that named it keep its name."""
    groups.delete_project(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
