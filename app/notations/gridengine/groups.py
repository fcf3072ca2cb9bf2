"""Grid Engine host groups (hostgroup(5), ``qconf -ahgrp``), user access lists
(access_list(5), ``qconf -au``) and projects (project(5), ``qconf -aprj``): their names,
and the hosts a host group holds once its sub-groups are resolved
(docs/notations/gridengine.md#host-groups-access-lists-and-projects).

A host group is ``@name`` and lists hosts and other host groups (``@sub``, hostgroup(5):
"if the first character of the host_identifier is an "@" sign the name is used to
reference a hostgroup(5) which is taken as a subgroup of this group"). qconf refuses a
definition that would make a group contain itself (Grid Engine 6.2u5
MSG_HGROUP_CYCLEINDEF_SS: ``Hostgroup "@a" in specification of "@b" would create a
cycle``) and one naming a group that does not exist (MSG_HGROUP_NOTEXIST_S: ``Host group
"@x" does not exist``). Access lists and projects are plain names (sge_types(5) ``name``:
printable ASCII without ``/``, ``:``, ``@``, ``\\``, ``*``, ``?``); jobmatch also refuses
blanks, commas, ``!``, braces and ``=``, which would make them impossible to write in a
quota filter or a ``-P`` option.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from app.notations.errors import NotationError

__all__ = [
    "GroupError",
    "check_host_group_name",
    "check_host_name",
    "check_object_name",
    "check_user_name",
    "resolve_host_groups",
]

#: A name after the ``@`` of a host group, an access list's or a project's name.
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
#: A host or user name in a member list.
_MEMBER = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
#: Words qconf refuses as an object's name, in any case (Son of Grid Engine 8.1.9 answered
#: ``qconf -Ahgrp`` of ``@all`` with ``Keyword ("ALL") not allowed as objectname``;
#: verify_str_key() of source/libs/sgeobj/sge_utility.c holds the list).
_KEYWORDS = ("NONE", "ALL", "TEMPLATE")
#: Members one group or list may hold (bounds the work before any is done).
MAX_MEMBERS = 10_000


class GroupError(NotationError):
    """A host group, access list or project is malformed: a bad name, a bad member, a
    sub-group that does not exist, or nesting that would make a host group contain
    itself. ``notation`` names the object (hostgroup(5), access_list(5), project(5))."""

    def __init__(
        self,
        message: str,
        *,
        notation: str,
        text: str | None = None,
        position: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.notation = notation
        super().__init__(message, text=text, position=position, expected=expected)


def check_host_group_name(name: str) -> str:
    """``@name``; GroupError in Grid Engine's words (MSG_HGRP_INVALIDHOSTGROUPNAME_S)
    otherwise."""
    if not name.startswith("@") or not _NAME.fullmatch(name[1:]):
        raise GroupError(
            f'host group name "{name}" is not valid',
            notation="hostgroup(5)",
            text=name,
            position=0 if not name.startswith("@") else 1,
            expected="'@' and a name of letters, digits, '_', '.', '-' (at most 255)",
        )
    _not_a_keyword(name[1:], name, "hostgroup(5)", 1)
    return name


def _not_a_keyword(name: str, text: str, notation: str, position: int) -> None:
    keyword = name.upper()
    if keyword in _KEYWORDS:
        raise GroupError(
            f'Keyword ("{keyword}") not allowed as objectname',
            notation=notation,
            text=text,
            position=position,
            expected=f"a name other than {', '.join(_KEYWORDS)} (in any case)",
        )


def check_object_name(name: str, notation: str, what: str) -> str:
    """An access list's or project's name; GroupError naming ``what`` otherwise."""
    if not _NAME.fullmatch(name):
        bad = next((i for i, c in enumerate(name) if not _MEMBER.fullmatch(c)), 0)
        raise GroupError(
            f"invalid {what} name {name!r}",
            notation=notation,
            text=name,
            position=bad if name else 0,
            expected="a name of letters, digits, '_', '.', '-' (at most 255)",
        )
    _not_a_keyword(name, name, notation, 0)
    return name


def check_host_name(name: str, group: str, index: int) -> str:
    """A member host of a group (position: the member's index in the list)."""
    if not _MEMBER.fullmatch(name):
        raise GroupError(
            f"invalid host {name!r} in host group {group!r}",
            notation="hostgroup(5)",
            text=name,
            position=index,
            expected="a host name or '@' and a host group name",
        )
    return name


def check_user_name(name: str, acl: str, index: int) -> str:
    """A member user of an access list. ``@group`` entries (primary Unix groups in
    access_list(5)) are refused: jobmatch knows no Unix groups of its submitters."""
    if name.startswith("@"):
        raise GroupError(
            f"access list {acl!r} entry {name!r} names a Unix group; jobmatch has no Unix groups",
            notation="access_list(5)",
            text=name,
            position=index,
            expected="a user name",
        )
    if not _MEMBER.fullmatch(name):
        raise GroupError(
            f"invalid user {name!r} in access list {acl!r}",
            notation="access_list(5)",
            text=name,
            position=index,
            expected="a user name of letters, digits, '_', '.', '-'",
        )
    return name


def check_members(group: str, members: Sequence[str], checker: str = "host") -> list[str]:
    """A group's members checked, duplicates dropped (first kept)."""
    if len(members) > MAX_MEMBERS:
        raise GroupError(
            f"{len(members)} members in {group!r}",
            notation="hostgroup(5)" if checker == "host" else "access_list(5)",
            position=MAX_MEMBERS,
            expected=f"at most {MAX_MEMBERS} members",
        )
    seen: dict[str, None] = {}
    for index, member in enumerate(members):
        if checker == "host":
            if member.startswith("@"):
                check_host_group_name(member)
            else:
                check_host_name(member, group, index)
        else:
            check_user_name(member, group, index)
        seen.setdefault(member, None)
    return list(seen)


def resolve_host_groups(groups: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Every group's hosts, sub-groups resolved (``hgroup_find_all_references()``), host
    names lower-cased (Grid Engine compares hosts ignoring case). GroupError when a
    sub-group does not exist or the nesting has a cycle."""
    members = {name: list(items) for name, items in groups.items()}
    for name, items in members.items():
        for item in items:
            if item.startswith("@") and item not in members:
                raise GroupError(
                    f'Host group "{item}" does not exist',
                    notation="hostgroup(5)",
                    text=name,
                    expected=f"an existing host group as a sub-group of {name}",
                )
    resolved: dict[str, frozenset[str]] = {}
    for name in members:
        _resolve(name, members, resolved, [])
    return resolved


def _resolve(
    name: str,
    members: Mapping[str, list[str]],
    resolved: dict[str, frozenset[str]],
    path: list[str],
) -> frozenset[str]:
    found = resolved.get(name)
    if found is not None:
        return found
    if name in path:
        # ``path`` holds the groups being resolved, outermost first: the one that named
        # ``name`` again is the last.
        raise GroupError(
            f'Hostgroup "{name}" in specification of "{path[-1]}" would create a cycle',
            notation="hostgroup(5)",
            text=" -> ".join([*path[path.index(name) :], name]),
            expected="host groups that do not contain themselves",
        )
    path.append(name)
    hosts: set[str] = set()
    for item in members[name]:
        if item.startswith("@"):
            hosts |= _resolve(item, members, resolved, path)
        else:
            hosts.add(item.lower())
    path.pop()
    found = resolved[name] = frozenset(hosts)
    return found
