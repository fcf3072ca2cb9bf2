"""`jobmatch demand` and `jobmatch templates put|list|show|delete` against a live server
(issue 40): totals by answer, each category's count, oldest age, answer and reason, and
with templates the suggested new workers."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Jobmatch

JAVA17_BOX = "resources: 'language: ?java; java: ?17'\nslots: 4\ncost: 2.5\nmax_count: 3\n"


def _rows(stdout: str, first: str) -> dict[str, list[str]]:
    """Table rows whose first cell is one of ``first``'s words, by that cell."""
    return {
        line.split()[0]: line.split()
        for line in stdout.splitlines()
        if line.split() and line.split()[0] in first.split()
    }


def test_templates_put_list_show_and_delete(jobmatch: Jobmatch, tmp_path: Path) -> None:
    body = tmp_path / "java17-box.yaml"
    body.write_text(JAVA17_BOX, encoding="utf-8")
    put = jobmatch("templates", "put", "java17-box", str(body))
    assert put.code == 0, put.stderr
    assert "template:   java17-box" in put.stdout.splitlines()
    assert "max count:  3" in put.stdout.splitlines()

    listed = jobmatch("templates", "list")
    assert listed.code == 0, listed.stderr
    header, _rule, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "RESOURCES", "SLOTS", "INVENTORY", "COST", "MAX"]
    assert row.split() == [
        "java17-box",
        "language:",
        "?java;",
        "java:",
        "?17",
        "4",
        "-",
        "2.5",
        "3",
    ]
    assert jobmatch("templates", "list", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/templates?limit=50"
    )
    assert jobmatch("templates", "show", "java17-box", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/templates/java17-box"
    )

    deleted = jobmatch("templates", "delete", "java17-box")
    assert (deleted.code, deleted.stdout) == (0, "deleted template java17-box\n")
    missing = jobmatch("templates", "show", "java17-box")
    assert missing.code == 1 and missing.stderr.startswith("error: 404 Not Found: ")
    assert len(missing.stderr.splitlines()) == 1


def test_a_template_the_server_refuses_is_one_line(jobmatch: Jobmatch, tmp_path: Path) -> None:
    body = tmp_path / "bad.yaml"
    body.write_text("slots: -1\n", encoding="utf-8")
    refused = jobmatch("templates", "put", "bad", str(body))
    assert refused.code != 0 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "slots" in refused.stderr and "Traceback" not in refused.stderr
    unreadable = jobmatch("templates", "put", "bad", str(tmp_path / "absent.yaml"))
    assert unreadable.code == 2 and unreadable.stderr.startswith("error: ")
    assert jobmatch.api("GET", "/v1/templates")["items"] == []


def test_demand_shows_totals_categories_and_the_suggested_mix(
    jobmatch: Jobmatch, tmp_path: Path
) -> None:
    jobmatch.api("POST", "/v1/workers", {"name": "j12", "resources": "language: ?java; java: ?12"})
    body = tmp_path / "java17-box.yaml"
    body.write_text(JAVA17_BOX, encoding="utf-8")
    assert jobmatch("templates", "put", "java17-box", str(body)).code == 0
    java12 = jobmatch.api("POST", "/v1/jobs", {"resources": "language: java; java: 12"})
    java17 = [
        jobmatch.api("POST", "/v1/jobs", {"resources": "language: java; java: 17"})
        for _ in range(2)
    ]
    assert java17[0]["state"] == "waiting"  # a template could run it

    shown = jobmatch("demand")
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == ("waiting jobs: 3 (never 2, capacity 0, policy 0, ready 1) in 2 categories")
    assert lines[2].split() == ["CATEGORY", "WAITING", "OLDEST", "ANSWER", "REASON"]
    rows = _rows(shown.stdout, f"{java12['category_id']} {java17[0]['category_id']}")
    ready = rows[str(java12["category_id"])]
    assert (ready[1], ready[3]) == ("1", "ready") and ready[2].endswith(("s", "m"))
    never = rows[str(java17[0]["category_id"])]
    assert (never[1], never[3]) == ("2", "never")
    assert " ".join(never[4:]) == (
        "no worker offers tag '17' in group 'java'; waiting for a worker like template java17-box"
    )
    assert "suggested new workers" not in shown.stdout
    as_json = jobmatch("demand", "-o", "json").json()
    from_api = jobmatch.api("GET", "/v1/demand")
    for page in (as_json, from_api):
        for item in page["items"]:
            assert item.pop("oldest_age") >= 0  # the one figure that moves between calls
    assert as_json == from_api

    mixed = jobmatch("demand", "--templates")
    assert mixed.code == 0, mixed.stderr
    assert "suggested new workers: 1 (cost 2.5), starting 2 jobs" in mixed.stdout
    mix = _rows(mixed.stdout, "java17-box")["java17-box"]
    assert mix == ["java17-box", "1", "2", str(java17[0]["category_id"])]
    named = jobmatch("demand", "--template", "java17-box", "-o", "json").json()
    assert [(m["template"], m["workers"]) for m in named["suggestion"]["mix"]] == [
        ("java17-box", 1)
    ]

    unknown = jobmatch("demand", "--template", "nope")
    assert unknown.code != 0 and len(unknown.stderr.splitlines()) == 1, unknown.stderr
    assert unknown.stderr.startswith("error: ") and "nope" in unknown.stderr
