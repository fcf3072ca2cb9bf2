"""`jobmatch shares list|weight|group` against a live server (docs/ordering.md): the
submitters with their group, weight, share and usage; the groups, a submitter without
one shown as a group of its own; bad weights refused with the server's words."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch


def _rows(lines: list[str]) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in lines if line.strip()}


def test_groups_and_weights_listed(jobmatch: Jobmatch) -> None:
    grouped = jobmatch("shares", "weight", "alice", "2", "--group", "course-a")
    assert grouped.code == 0, grouped.stderr
    header, _rule, row = grouped.stdout.splitlines()
    assert header.split()[:3] == ["SUBMITTER", "GROUP", "WEIGHT"]
    assert row.split()[:3] == ["alice", "course-a", "2"]
    assert jobmatch("shares", "weight", "bob", "1", "--group", "course-a").code == 0
    assert jobmatch("shares", "weight", "carol", "1").code == 0
    weighted = jobmatch("shares", "group", "course-a", "3")
    assert weighted.code == 0, weighted.stderr
    header, _rule, row = weighted.stdout.splitlines()
    assert header.split()[:3] == ["GROUP", "MEMBERS", "WEIGHT"]
    # course-a weighs 3 against carol's 1 (a group of her own): 75%.
    assert row.split()[:4] == ["course-a", "alice,bob", "3", "75.0%"]

    listed = jobmatch("shares", "list")
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("ordering: priority,age (fair share off)")
    split = lines.index("groups (a submitter without one is a group of its own):")
    submitters = _rows(lines[3 : split - 1])
    assert submitters["alice"][1:3] == ["course-a", "2"]
    assert submitters["carol"][1:3] == ["-", "1"]
    groups = _rows(lines[split + 3 :])
    assert groups["course-a"][1:4] == ["alice,bob", "3", "75.0%"]
    assert groups["(carol)"][1:4] == ["carol", "1", "25.0%"]

    # Without --group the submitter stays in its group; --no-group takes it out.
    assert jobmatch("shares", "weight", "alice", "1", "-o", "json").json()["group"] == "course-a"
    out = jobmatch("shares", "weight", "alice", "1", "--no-group", "-o", "json").json()
    assert out["group"] is None
    answer = jobmatch("shares", "list", "-o", "json").json()
    assert {g["group"]: g["members"] for g in answer["groups"]}["course-a"] == ["bob"]


def test_a_bad_weight_is_refused_with_the_server_s_words(jobmatch: Jobmatch) -> None:
    refused = jobmatch("shares", "group", "course-a", "0")
    assert refused.code != 0
    assert "weight" in refused.stderr and "greater than 0" in refused.stderr
    bad_name = jobmatch("shares", "weight", "alice", "1", "--group", "bad name")
    assert bad_name.code != 0 and "group" in bad_name.stderr
