"""Host groups, access lists and projects as notations (no database): names, nesting and
its cycles, and the ``@`` items of queue lists and resource quota filters.

Sources: hostgroup(5) (group_name begins with '@'; hostlist holds hosts and sub-groups),
access_list(5), project(5), sge_types(1) (wc_queue, wc_qdomain, wc_hostgroup), Grid Engine
6.2u5 source/libs/sgeobj/sge_qref.c qref_list_host_rejected(), source/libs/sgeobj/
sge_resource_quota.c rqs_match_user_host_scope() and rqs_get_rue_string(), and the
messages MSG_HGROUP_CYCLEINDEF_SS, MSG_HGROUP_NOTEXIST_S, MSG_HGRP_INVALIDHOSTGROUPNAME_S.
"""

from __future__ import annotations

import pytest

from app.notations.errors import NotationError
from app.notations.gridengine.groups import (
    GroupError,
    check_host_group_name,
    check_members,
    check_object_name,
    resolve_host_groups,
)
from app.notations.gridengine.queue_lists import QueueListError, QueueLists, parse_queue_list
from app.notations.gridengine.quota_parser import parse_quota_set
from app.notations.gridengine.quotas import QuotaGroups


def test_nested_groups_resolve_to_their_hosts_lower_cased() -> None:
    resolved = resolve_host_groups(
        {
            "@every": ["@linux", "@solaris", "H9"],
            "@linux": ["h1", "h2"],
            "@solaris": ["@sparc"],
            "@sparc": ["h3"],
            "@empty": [],
        }
    )
    assert resolved == {
        "@every": frozenset({"h1", "h2", "h3", "h9"}),
        "@linux": frozenset({"h1", "h2"}),
        "@solaris": frozenset({"h3"}),
        "@sparc": frozenset({"h3"}),
        "@empty": frozenset(),
    }


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"@a": ["@a"]}, 'Hostgroup "@a" in specification of "@a" would create a cycle'),
        ({"@a": ["@b"], "@b": ["h1", "@a"]}, 'Hostgroup "@a" in specification of "@b" would'),
        ({"@a": ["@b"], "@b": ["@c"], "@c": ["@a"]}, 'Hostgroup "@a" in specification of "@c"'),
    ],
)
def test_a_cycle_is_refused_in_grid_engine_words(
    groups: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(GroupError) as raised:
        resolve_host_groups(groups)
    assert raised.value.message.startswith(message)
    assert raised.value.notation == "hostgroup(5)"
    assert raised.value.expected == "host groups that do not contain themselves"


def test_a_sub_group_that_does_not_exist_is_refused() -> None:
    with pytest.raises(GroupError, match='Host group "@nosuch" does not exist'):
        resolve_host_groups({"@a": ["h1", "@nosuch"]})


@pytest.mark.parametrize("name", ["linux", "@", "@li nux", "@a/b", "@a@b", "@" + "x" * 256])
def test_bad_host_group_names_are_refused(name: str) -> None:
    with pytest.raises(GroupError) as raised:
        check_host_group_name(name)
    assert raised.value.message == f'host group name "{name}" is not valid'
    assert isinstance(raised.value, NotationError)


@pytest.mark.parametrize("name", ["st aff", "st@ff", "a,b", "", "a!b", "x" * 256])
def test_bad_access_list_and_project_names_are_refused(name: str) -> None:
    with pytest.raises(GroupError, match="invalid project name"):
        check_object_name(name, "project(5)", "project")


def test_members_are_checked_and_duplicates_dropped() -> None:
    assert check_members("@a", ["h1", "@b", "h1"]) == ["h1", "@b"]
    with pytest.raises(GroupError, match="invalid host 'h 1' in host group '@a'"):
        check_members("@a", ["h1", "h 1"])
    with pytest.raises(GroupError, match="names a Unix group"):
        check_members("staff", ["alice", "@users"], checker="user")


def test_a_host_group_item_of_a_queue_list_names_the_hosts_of_the_matching_groups() -> None:
    groups = resolve_host_groups({"@linux": ["h2"], "@lin2": ["h3"], "@sol": ["h1"]})
    (reference,) = parse_queue_list("all.q@@lin*")
    assert reference.host_group == "lin*"
    # Unresolved, a host group item names nothing.
    assert not reference.matches("all.q", "h2")
    resolved = reference.resolved(groups)
    assert [host for host in ("h1", "h2", "h3") if resolved.matches("all.q", host)] == ["h2", "h3"]
    assert resolved.matches("all.q", "H2")  # hosts ignore case
    assert not resolved.matches("other.q", "h2")
    lists = QueueLists(parse_queue_list("*@@sol")).resolved(groups)
    assert lists.allows("any.q", "h1") and not lists.allows("any.q", "h2")
    assert parse_queue_list("all.q@@linux").category_text() == "all.q@@linux"


def test_an_item_without_a_cluster_queue_is_refused_with_the_hint_qconf_gives() -> None:
    with pytest.raises(QueueListError) as raised:
        parse_queue_list("@linux")
    assert "queue names may not begin with @" in raised.value.message
    assert raised.value.expected == "a cluster queue before '@', e.g. \"*@linux\""


QUOTA = """name r
enabled TRUE
limit users @staff,!bob hosts !@linux to slots=1
"""


def test_quota_filters_match_access_lists_and_host_groups() -> None:
    (rule,) = parse_quota_set(QUOTA).rules
    groups = QuotaGroups(
        access_lists={"staff": frozenset({"alice", "bob"})},
        host_groups=resolve_host_groups({"@linux": ["H2"]}),
    )
    assert rule.matches("alice", None, None, "all.q", "h1", groups)
    assert not rule.matches("bob", None, None, "all.q", "h1", groups)  # excluded by name
    assert not rule.matches("carol", None, None, "all.q", "h1", groups)  # not in the list
    assert not rule.matches("alice", None, None, "all.q", "h2", groups)  # in @linux
    # Without groups, an '@' item matches nobody (a list that does not exist).
    assert not rule.matches("alice", None, None, "all.q", "h1")
    assert rule.to_text() == "users @staff,!bob hosts !@linux to slots=1"


def test_expanded_groups_key_the_usage_by_member_and_projects_by_name() -> None:
    rule = parse_quota_set("name r\nlimit users {@staff} projects {*} to slots=1").rules[0]
    groups = QuotaGroups(access_lists={"st*": frozenset({"x"}), "staff": frozenset({"alice"})})
    assert rule.matches("alice", "p1", None, "q", "h", groups)
    assert not rule.matches("alice", None, None, "q", "h", groups)  # {*}: a project needed
    assert rule.usage_key("alice", "p1", None, "q", "h") == "alice/p1////"


@pytest.mark.parametrize("name", ["@all", "@ALL", "@None", "@template"])
def test_keywords_are_no_host_group_names(name: str) -> None:
    """Recorded from Son of Grid Engine 8.1.9 (Debian 8.1.9+dfsg-10+b1): ``qconf -Ahgrp`` of
    ``@all`` answered ``Keyword ("ALL") not allowed as objectname`` (verify_str_key(),
    source/libs/sgeobj/sge_utility.c: NONE, ALL, TEMPLATE in any case)."""
    with pytest.raises(GroupError) as caught:
        check_host_group_name(name)
    assert caught.value.message == f'Keyword ("{name[1:].upper()}") not allowed as objectname'
    assert caught.value.position == 1


@pytest.mark.parametrize("name", ["all", "NONE", "Template"])
def test_keywords_are_no_access_list_or_project_names(name: str) -> None:
    with pytest.raises(GroupError, match="not allowed as objectname"):
        check_object_name(name, "project(5)", "project")


def test_a_name_that_only_contains_a_keyword_is_fine() -> None:
    assert check_host_group_name("@allhosts") == "@allhosts"
    assert check_object_name("nonexempt", "access_list(5)", "access list") == "nonexempt"
