"""`jobmatch workers list|show` against a live server, on every configured database."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch, register_workers


def test_list_shows_a_table_and_json_is_the_apis_answer(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    table = jobmatch("workers", "list")
    assert table.code == 0, table.stderr
    header, _rule, *rows = table.stdout.splitlines()
    assert header.split() == ["NAME", "STATE", "SLOTS", "RANK", "LAST", "SEEN"]
    assert [row.split()[:4] for row in rows] == [
        ["n0", "active", "0/8", "1"],
        ["w1", "active", "0/2", "-"],
    ]
    assert "RESOURCES" not in header

    wide = jobmatch("workers", "list", "-o", "wide")
    assert "RESOURCES" in wide.stdout and "core=32, gpu=4, node=1, socket=2" in wide.stdout
    assert "language: ?java, ?python; java: ?8, ?11, ?12" in wide.stdout

    assert jobmatch("workers", "list", "-o", "json").json() == jobmatch.api("GET", "/v1/workers")


def test_list_follows_pages_up_to_the_limit(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    jobmatch.api("POST", "/v1/workers", {"name": "w2"})
    first_two = jobmatch("workers", "list", "--limit", "2")
    assert first_two.code == 0
    assert [row.split()[0] for row in first_two.stdout.splitlines()[2:]] == ["n0", "w1"]
    assert "more items follow" in first_two.stderr
    assert jobmatch("workers", "list", "--limit", "2", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/workers?limit=2"
    )


def test_show_a_worker_and_its_queue_instances(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    shown = jobmatch("workers", "show", "n0")
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "name:             n0" in lines
    assert "slots used/total: 0/8" in lines
    assert "inventory:        node/[socket=2/[core=16;gpu=2]]" in lines
    assert "free:             core=32, gpu=4, node=1, socket=2" in lines
    assert any(line.split() == ["default", "8", "0"] for line in lines)
    assert jobmatch("workers", "show", "n0", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/workers/n0"
    )


def test_show_an_unknown_worker_is_refused_in_one_line(jobmatch: Jobmatch) -> None:
    missing = jobmatch("workers", "show", "nobody")
    assert missing.code == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("error: 404 Not Found: ")
    assert "nobody" in missing.stderr and missing.stderr.count("\n") == 1
