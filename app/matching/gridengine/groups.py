"""Administration of Grid Engine host groups (``qconf -ahgrp``, ``-shgrp``, ``-mhgrp``,
``-dhgrp``), user access lists (``qconf -au``, ``-su``, ``-du``, ``-dul``) and projects
(``qconf -aprj``, ``-sprj``, ``-dprj``), and their loading for a decision
(docs/notations/gridengine.md#host-groups-access-lists-and-projects).

A host group's definition is checked against every other group before it is stored:
sub-groups must exist and the nesting must not make a group contain itself (Grid Engine's
words, app/notations/gridengine/groups.py). A group another group contains cannot be
deleted (MSG_HGROUP_REFINHGOUP_SS). A change wakes every waiting pull: a job's ``-q``
list or a quota filter may name the group. The misfit cache needs no change: its SQL
treats a host group item of a queue list as naming every host (a superset the evaluator
narrows, app/matching/gridengine/queue_lists.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import literal, select, union_all
from sqlalchemy.orm import Session

from app.db.models import AccessList, AccessListMember, HostGroup, HostGroupMember, Project
from app.matching import announce
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.named_rows import row_by_name, rows_by_name
from app.notations.gridengine.groups import (
    GroupError,
    check_host_group_name,
    check_members,
    check_object_name,
    resolve_host_groups,
)
from app.notations.gridengine.quotas import QuotaGroups

if TYPE_CHECKING:  # the state and the book hold groups: imported for types only
    from app.matching.gridengine.quotas import QuotaBook
    from app.matching.gridengine.state import ClusterState

__all__ = [
    "ClusterGroups",
    "access_list_members",
    "check_project",
    "create_access_list",
    "create_host_group",
    "create_project",
    "delete_access_list",
    "delete_host_group",
    "delete_project",
    "ensure_groups",
    "get_access_list",
    "get_host_group",
    "get_project",
    "host_group_members",
    "list_access_lists",
    "list_host_groups",
    "list_projects",
    "load_groups",
    "names_groups",
    "quota_book_names_groups",
    "replace_access_list",
    "replace_host_group",
]


@dataclass(frozen=True)
class ClusterGroups:
    """The cluster's host groups (name with ``@`` -> lower-case hosts, sub-groups
    resolved) and access lists (name -> users), as a decision reads them."""

    host_groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    access_lists: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def for_quotas(self) -> QuotaGroups:
        return QuotaGroups(access_lists=self.access_lists, host_groups=self.host_groups)


def _invalid(field_name: str, error: GroupError) -> InvalidFieldError:
    return InvalidFieldError(field_name, error.message, error)


# ---------------------------------------------------------------------------------------
# Host groups


def list_host_groups(session: Session, *, limit: int | None, offset: int) -> list[HostGroup]:
    return rows_by_name(session, HostGroup, limit=limit, offset=offset)


def get_host_group(session: Session, name: str, *, lock: bool = False) -> HostGroup:
    # Grid Engine's words (MSG_HGROUP_NOTEXIST_S).
    return row_by_name(
        session, HostGroup, name, missing=f'Host group "{name}" does not exist', lock=lock
    )


def host_group_members(session: Session, row: HostGroup) -> list[str]:
    """The group's ``hostlist`` as given: hosts and ``@sub`` groups, in order."""
    return list(
        session.scalars(
            select(HostGroupMember.member)
            .where(HostGroupMember.group_id == row.id)
            .order_by(HostGroupMember.position)
        )
    )


def _definitions(session: Session) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {
        name: [] for name in session.scalars(select(HostGroup.name).order_by(HostGroup.name))
    }
    for name, member in session.execute(
        select(HostGroup.name, HostGroupMember.member)
        .join(HostGroupMember, HostGroupMember.group_id == HostGroup.id)
        .order_by(HostGroup.name, HostGroupMember.position)
    ):
        found[name].append(member)
    return found


def _checked_group(session: Session, name: str, members: Sequence[str]) -> list[str]:
    """The group's members checked, and checked with every other group: its sub-groups
    exist and no group would contain itself (422 on ``members`` otherwise)."""
    try:
        check_host_group_name(name)
    except GroupError as error:
        raise _invalid("name", error) from None
    try:
        checked = check_members(name, members)
        definitions = _definitions(session)
        definitions[name] = checked
        resolve_host_groups(definitions)
    except GroupError as error:
        raise _invalid("members", error) from None
    return checked


def _store_members(session: Session, row: HostGroup, members: Sequence[str]) -> None:
    session.add_all(
        HostGroupMember(group_id=row.id, position=index, member=member)
        for index, member in enumerate(members)
    )
    session.flush()
    announce.everything_changed(session)


def create_host_group(session: Session, name: str, members: Sequence[str]) -> HostGroup:
    """``qconf -ahgrp``: a new group; 409 when the name is taken, 422 on a bad name, a
    bad member, an unknown sub-group or a cycle."""
    checked = _checked_group(session, name, members)
    if session.scalar(select(HostGroup.id).where(HostGroup.name == name)) is not None:
        raise ConflictError(f'host group "{name}" already exists')
    row = HostGroup(name=name)
    session.add(row)
    session.flush()
    _store_members(session, row, checked)
    return row


def replace_host_group(session: Session, name: str, members: Sequence[str]) -> HostGroup:
    """``qconf -mhgrp``: the group's new ``hostlist`` (404 when there is no such group)."""
    row = get_host_group(session, name, lock=True)
    checked = _checked_group(session, name, members)
    for member in session.scalars(
        select(HostGroupMember).where(HostGroupMember.group_id == row.id)
    ):
        session.delete(member)
    session.flush()
    _store_members(session, row, checked)
    return row


def delete_host_group(session: Session, name: str) -> None:
    """``qconf -dhgrp``: 409 in Grid Engine's words while another group contains it."""
    row = get_host_group(session, name, lock=True)
    holders = list(
        session.scalars(
            select(HostGroup.name)
            .join(HostGroupMember, HostGroupMember.group_id == HostGroup.id)
            .where(HostGroupMember.member == name)
            .order_by(HostGroup.name)
        )
    )
    if holders:
        raise ConflictError(
            f'denied: following hostgroups still reference "{name}": {", ".join(holders)}'
        )
    session.delete(row)
    session.flush()
    announce.everything_changed(session)


# ---------------------------------------------------------------------------------------
# Access lists


def list_access_lists(session: Session, *, limit: int | None, offset: int) -> list[AccessList]:
    return rows_by_name(session, AccessList, limit=limit, offset=offset)


def get_access_list(session: Session, name: str, *, lock: bool = False) -> AccessList:
    return row_by_name(
        session, AccessList, name, missing=f"access list {name!r} not found", lock=lock
    )


def access_list_members(session: Session, row: AccessList) -> list[str]:
    return list(
        session.scalars(
            select(AccessListMember.member)
            .where(AccessListMember.list_id == row.id)
            .order_by(AccessListMember.position)
        )
    )


def _checked_list(name: str, members: Sequence[str]) -> list[str]:
    try:
        check_object_name(name, "access_list(5)", "access list")
    except GroupError as error:
        raise _invalid("name", error) from None
    try:
        return check_members(name, members, checker="user")
    except GroupError as error:
        raise _invalid("members", error) from None


def _store_users(session: Session, row: AccessList, members: Sequence[str]) -> None:
    session.add_all(
        AccessListMember(list_id=row.id, position=index, member=member)
        for index, member in enumerate(members)
    )
    session.flush()
    announce.everything_changed(session)


def create_access_list(session: Session, name: str, members: Sequence[str]) -> AccessList:
    """``qconf -au user,... name`` on a new list; 409 when the name is taken."""
    checked = _checked_list(name, members)
    if session.scalar(select(AccessList.id).where(AccessList.name == name)) is not None:
        raise ConflictError(f"access list {name!r} already exists")
    row = AccessList(name=name)
    session.add(row)
    session.flush()
    _store_users(session, row, checked)
    return row


def replace_access_list(session: Session, name: str, members: Sequence[str]) -> AccessList:
    """``qconf -mu``: the list's new entries (404 when there is no such list)."""
    row = get_access_list(session, name, lock=True)
    checked = _checked_list(name, members)
    for member in session.scalars(
        select(AccessListMember).where(AccessListMember.list_id == row.id)
    ):
        session.delete(member)
    session.flush()
    _store_users(session, row, checked)
    return row


def delete_access_list(session: Session, name: str) -> None:
    """``qconf -dul``: quota filters naming it then match nobody through it."""
    row = get_access_list(session, name, lock=True)
    session.delete(row)
    session.flush()
    announce.everything_changed(session)


# ---------------------------------------------------------------------------------------
# Projects


def list_projects(session: Session, *, limit: int | None, offset: int) -> list[Project]:
    return rows_by_name(session, Project, limit=limit, offset=offset)


def get_project(session: Session, name: str, *, lock: bool = False) -> Project:
    return row_by_name(session, Project, name, missing=f"project {name!r} not found", lock=lock)


def create_project(session: Session, name: str) -> Project:
    """``qconf -aprj``: 409 when the name is taken, 422 on a bad name."""
    try:
        check_object_name(name, "project(5)", "project")
    except GroupError as error:
        raise _invalid("name", error) from None
    if session.scalar(select(Project.id).where(Project.name == name)) is not None:
        raise ConflictError(f"project {name!r} already exists")
    row = Project(name=name)
    session.add(row)
    session.flush()
    return row


def delete_project(session: Session, name: str) -> None:
    """``qconf -dprj``: jobs that named it keep its name (as a running Grid Engine job
    keeps its ``-P``); new jobs may no longer name it."""
    row = get_project(session, name, lock=True)
    session.delete(row)
    session.flush()
    announce.everything_changed(session)


def check_project(session: Session, name: str | None) -> str | None:
    """A job's ``-P``: None, or a project that exists. Grid Engine refuses the job
    otherwise (job_verify_project() in source/daemons/qmaster/sge_job_qmaster.c,
    MSG_JOB_PRJUNKNOWN_S); a 422 on ``project`` in its words."""
    if name is None:
        return None
    if session.scalar(select(Project.id).where(Project.name == name)) is None:
        raise InvalidFieldError(
            "project", f'job rejected: the requested project "{name}" does not exist'
        )
    return name


# ---------------------------------------------------------------------------------------
# Loading for a decision


def load_groups(session: Session) -> ClusterGroups:
    """Every host group (resolved) and access list, in one statement."""
    hosts = (
        select(literal("h").label("kind"), HostGroup.name, HostGroupMember.member)
        .select_from(HostGroup)
        .outerjoin(HostGroupMember, HostGroupMember.group_id == HostGroup.id)
    )
    users = (
        select(literal("u").label("kind"), AccessList.name, AccessListMember.member)
        .select_from(AccessList)
        .outerjoin(AccessListMember, AccessListMember.list_id == AccessList.id)
    )
    host_groups: dict[str, list[str]] = {}
    access_lists: dict[str, set[str]] = {}
    for kind, name, member in session.execute(union_all(hosts, users)):
        if kind == "h":
            members = host_groups.setdefault(name, [])
            if member is not None:
                members.append(member)
        else:
            users_of = access_lists.setdefault(name, set())
            if member is not None:
                users_of.add(member)
    # Stored groups were checked when written: they resolve.
    return ClusterGroups(
        resolve_host_groups(host_groups),
        {name: frozenset(members) for name, members in access_lists.items()},
    )


def ensure_groups(
    session: Session, state: ClusterState, *lists: str | None, quotas: QuotaBook | None = None
) -> None:
    """Load the groups into the state (``state.groups``) when a decision needs them: a
    queue list names a host group, or an enabled quota set has ``@`` items. A pull that
    needs none pays no statement for them."""
    if state.groups is not None:
        return
    if names_groups(*lists) or (quotas is not None and quota_book_names_groups(quotas)):
        state.groups = load_groups(session)


def quota_book_names_groups(book: QuotaBook) -> bool:
    """Whether a rule of a loaded quota book has an ``@`` item (an access list or a host
    group)."""
    return any(
        item.pattern.startswith("@")
        for loaded in book.sets
        for rule in loaded.definition.rules
        for kind in ("users", "hosts")
        if (found := rule.filter(kind)) is not None
        for item in found.items
    )


def names_groups(*texts: str | None) -> bool:
    """Whether a category's queue lists hold a host group item (``...@@...``)."""
    return any(text is not None and "@@" in text for text in texts)
