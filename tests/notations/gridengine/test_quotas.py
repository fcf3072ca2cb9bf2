"""Resource quota sets in their qconf text form (sge_resource_quota(5) of Grid Engine 6.2,
doc/man/man5/sge_resource_quota.5): parsing with positions, the canonical text out, filter
matching (rqs_filter_match) and usage keys (rqs_get_rue_string, sge_resource_quota.c)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.gridengine.attribute_table import ComplexTable, default_table
from app.notations.gridengine.definitions import Consumable
from app.notations.gridengine.quota_check import check_quota_set
from app.notations.gridengine.quota_parser import parse_quota_set, parse_quota_sets
from app.notations.gridengine.quotas import ERROR_LOAD_VAL, Filter, FilterItem, QuotaError

# The three EXAMPLES of sge_resource_quota(5), as the man page prints them (host group
# written as a pattern).
MAN_PAGE_EXAMPLES = """{
   name         max_u_slots
   description  "All users max use of 100 slots"
   enabled      true
   limit        to slots=100
}
{
   name         max_virtual_free_on_lx_hosts
   description  "resource quota for virtual_free restriction"
   enabled      true
   limit        users {user1,user2} hosts {lx*} to virtual_free=6g
   limit        users {*} hosts {lx*} to virtual_free=4g
}
{
   name         max_slots_on_every_host
   enabled      true
   limit        hosts {*} to slots=$num_proc*2
}
"""


def _table() -> ComplexTable:
    """The default table with virtual_free a consumable, as the man page's example assumes."""
    table = default_table()
    return ComplexTable(
        tuple(
            replace(d, consumable=Consumable.YES) if d.name == "virtual_free" else d for d in table
        ),
        table.builtin_names,
    )


def test_the_man_page_examples_parse_and_print_back() -> None:
    """sge_resource_quota(5) EXAMPLES: three sets, their rules in order, and qconf -srqs's
    text that parses to the same sets."""
    sets = parse_quota_sets(MAN_PAGE_EXAMPLES)
    assert [s.name for s in sets] == [
        "max_u_slots",
        "max_virtual_free_on_lx_hosts",
        "max_slots_on_every_host",
    ]
    first, second, third = sets
    assert first.enabled and first.description == "All users max use of 100 slots"
    assert first.rules[0].to_text() == "to slots=100"
    assert second.rules[0].users == Filter((FilterItem("user1"), FilterItem("user2")), True)
    assert second.rules[1].to_text() == "users {*} hosts {lx*} to virtual_free=4g"
    assert third.rules[0].limits[0].dynamic
    assert third.description == "NONE"
    for quota_set in sets:
        assert parse_quota_set(quota_set.to_text()) == quota_set
    checked = [check_quota_set(s, _table()) for s in sets]
    assert checked[1].rules[0].limits[0].number == 6_000_000_000.0
    assert checked[0].rules[0].limits[0].number == 100.0


def test_text_out_is_qconf_srqs() -> None:
    quota_set = parse_quota_set(
        "name r\nenabled false\nlimit name big users {a,!b} pes * queues all.q to s=2,h_vmem=1G"
    )
    assert quota_set.to_text() == (
        "{\n"
        "   name         r\n"
        "   description  NONE\n"
        "   enabled      FALSE\n"
        "   limit        name big users {a,!b} pes * queues all.q to s=2,h_vmem=1G\n"
        "}\n"
    )
    assert quota_set.rule_label(0) == "r/big"


def test_backslash_newline_joins_lines() -> None:
    """sge_resource_quota(5): a backslash before a newline is replaced by a space."""
    quota_set = parse_quota_set("name r\nlimit users {*} \\\n   to slots=1\n")
    assert quota_set.rules[0].to_text() == "users {*} to slots=1"


@pytest.mark.parametrize(
    ("text", "fragment", "message"),
    [
        ("name r\nlimit users {a to slots=1", "{a", "unclosed '{'"),
        ("name r\nlimit users a to", "", "'to' without limits"),
        ("name r\nlimit users a", "", "no limits"),
        ("name r\nlimit owners a to slots=1", "owners", "unknown rule keyword"),
        ("name r\nlimit users a users b to slots=1", "users b", "given twice"),
        ("name r\nlimit projects @staff to slots=1", "@staff", "names a group"),
        ("name r\nlimit queues {@lx} to slots=1", "@lx", "names a group"),
        ("name r\nlimit hosts !@l/x to slots=1", "!@l/x", "invalid hosts item"),
        ("name r\nlimit to slots", "slots", "not attr=value"),
        ("name r\nlimit to slots=1 extra", "extra", "after the limits"),
        ("name r\nlimit to slots=$num_proc", "slots=$", "not host-specific"),
        ("name r\nlimit hosts {*} to slots=$num_proc*x", "*x", "dynamic limit"),
        ("name r\nenabled maybe\nlimit to slots=1", "maybe", "enabled value"),
        ("name r/x\nlimit to slots=1", "r/x", "invalid set name"),
        ("name r\ncolour red\nlimit to slots=1", "colour", "unknown keyword"),
        ("{\nname r\nlimit to slots=1\n", "", "not closed"),
        ("name r\n", "name", "has no rule"),
        ("limit to slots=1", "limit", "has no name"),
        ("name r\nlimit name 2 to slots=1", "2 to", "is a number"),
        ("name r\ndescription a\x00b\nlimit to slots=1", "\x00", "control character"),
        ("name r\nlimit name a to slots=1\nlimit name a to s=2", "a to s=2", "used twice"),
    ],
)
def test_errors_name_the_position_and_what_was_expected(
    text: str, fragment: str, message: str
) -> None:
    with pytest.raises(QuotaError) as raised:
        parse_quota_set(text)
    error = raised.value
    assert message in error.message
    assert error.expected
    assert error.notation == "sge-resource-quota"
    # "" where the text ended before what was expected.
    assert error.position == (text.index(fragment) if fragment else len(text))


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("arch=lx-amd64", "not a consumable"),
        ("no_such=1", "unknown resource"),
        ("slots=-1", "invalid value"),
        ("slots=INFINITY", "invalid value"),
    ],
)
def test_limits_are_checked_against_the_attribute_table(limit: str, message: str) -> None:
    text = f"name r\nlimit to {limit}\n"
    with pytest.raises(QuotaError) as raised:
        check_quota_set(parse_quota_set(text), default_table(), text=text)
    assert message in raised.value.message
    assert raised.value.position == text.index(limit)


def test_dynamic_limits_take_int_or_double_attributes_only() -> None:
    """sge_resource_quota(5): the complex values of a dynamic limit are INT or DOUBLE."""
    text = "name r\nlimit hosts {*} to slots=$mem_free*2\n"
    with pytest.raises(QuotaError, match="not an INT or DOUBLE"):
        check_quota_set(parse_quota_set(text), default_table(), text=text)
    ok = check_quota_set(
        parse_quota_set("name r\nlimit hosts {*} to slots=$p*2+1"), default_table()
    )
    limit = ok.rules[0].limits[0]
    assert limit.value_for({"num_proc": 4.0}) == 9.0
    # Grid Engine 6.2u5 and 8.1.9 source/libs/sched/sort_hosts.c scaled_mixed_load():
    # ERROR_LOAD_VAL (9999) when the host lacks a value the formula names.
    assert limit.value_for({}) == ERROR_LOAD_VAL == 9999.0


def test_filters_match_as_rqs_filter_match() -> None:
    """An excluded item that matches rejects; else one of the other items must match, if
    any; a job without a project matches `!*` but not `*` (sge_resource_quota(5),
    projects)."""
    rule = parse_quota_set(
        "name r\nlimit users !root,a* projects !* queues all.q hosts {n[0-3]} to slots=1"
    ).rules[0]
    assert rule.matches("alice", None, None, "all.q", "n1")
    assert rule.matches("alice", None, None, "all.q", "N2")  # host names ignore case
    assert not rule.matches("root", None, None, "all.q", "n1")
    assert not rule.matches("bob", None, None, "all.q", "n1")
    assert not rule.matches("alice", "p1", None, "all.q", "n1")
    assert not rule.matches("alice", None, None, "long.q", "n1")
    assert not rule.matches("alice", None, None, "all.q", "n9")
    anyone = parse_quota_set("name r\nlimit users !root to slots=1").rules[0]
    assert anyone.matches("bob", None, None, "q", "h")
    pes = parse_quota_set("name r\nlimit pes * to slots=1").rules[0]
    assert pes.matches("bob", None, "mpi", "q", "h")
    assert not pes.matches("bob", None, None, "q", "h")


def test_usage_keys_hold_the_expanded_filters_only() -> None:
    """rqs_get_rue_string: user/project/pe/queue/host, empty for filters counted together."""
    rule = parse_quota_set("name r\nlimit users {*} queues all.q hosts {*} to slots=1").rules[0]
    assert rule.usage_key("alice", None, None, "all.q", "H1") == "alice////h1/"
    together = parse_quota_set("name r\nlimit users * to slots=1").rules[0]
    assert together.usage_key("alice", None, "mpi", "all.q", "h1") == "/////"


@given(st.text(max_size=200))
def test_any_text_parses_or_fails_with_a_quota_error(text: str) -> None:
    """No input makes the parser fail otherwise (positions within the text)."""
    try:
        sets = parse_quota_sets(text)
    except QuotaError as error:
        assert error.position is None or 0 <= error.position <= len(text)
    else:
        for quota_set in sets:
            assert parse_quota_set(quota_set.to_text()) == quota_set
