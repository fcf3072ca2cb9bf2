"""`jobmatch tasks list` and `jobmatch attributes list` against a live server."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch


def test_tasks_list(jobmatch: Jobmatch) -> None:
    jobmatch.api(
        "POST",
        "/v1/tasks",
        {"name": "shell", "description": "run a command", "requirements": {"ge": ["x:y", 1]}},
    )
    table = jobmatch("tasks", "list")
    assert table.code == 0, table.stderr
    assert table.stdout.splitlines()[2].split() == ["shell", "1", "-", "run", "a", "command"]
    assert '{"ge": ["x:y", 1]}' in jobmatch("tasks", "list", "-o", "wide").stdout
    assert jobmatch("tasks", "list", "-o", "json").json() == jobmatch.api("GET", "/v1/tasks")


def test_attributes_list_is_the_grid_engine_complex(jobmatch: Jobmatch) -> None:
    table = jobmatch("attributes", "list")
    assert table.code == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:]}
    # Grid Engine 6.2u5's default complex (`qconf -sc`): slots is a consumable INT.
    assert rows["slots"] == ["slots", "s", "INT", "<=", "YES", "YES", "1"]
    assert rows["arch"][:4] == ["arch", "a", "RESTRING", "=="]
    answer = jobmatch.api("GET", "/v1/attributes")
    assert jobmatch("attributes", "list", "-o", "json").json() == answer
