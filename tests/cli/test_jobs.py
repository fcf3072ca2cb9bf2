"""`jobmatch jobs list|show|explain|submit|cancel` against a live server, on every
configured database."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Jobmatch, register_workers

JAVA12 = "language: java; java: 12"
JAVA14 = "language: java; java: 14"


def submit(jobmatch: Jobmatch, *args: str) -> dict[str, object]:
    answer: dict[str, object] = jobmatch("jobs", "submit", *args, "-o", "json").json()
    return answer


def test_submit_show_and_list(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    shown = jobmatch("jobs", "submit", "--resources", JAVA12, "--priority", "3")
    assert shown.code == 0, shown.stderr
    assert shown.stdout.splitlines()[:2] == ["id:        1", "state:     waiting"]
    assert f"request:   resources={JAVA12}" in shown.stdout.splitlines()
    refused = submit(jobmatch, "--resources", JAVA14)
    assert refused["state"] == "failed" and refused["failure_reason"] == "No suitable worker found"
    # A job in another notation, from a file with an option on top.
    assert submit(jobmatch, "--requires", "host:n[0-1]", "--shape", "slot/core=4")["state"] == (
        "waiting"
    )

    assert jobmatch("jobs", "show", "1", "-o", "json").json() == jobmatch.api("GET", "/v1/jobs/1")
    listed = jobmatch("jobs", "list")
    assert listed.code == 0, listed.stderr
    rows = [row.split()[:2] for row in listed.stdout.splitlines()[2:]]
    assert rows == [["1", "waiting"], ["2", "failed"], ["3", "waiting"]]
    assert jobmatch("jobs", "list", "-o", "json").json() == jobmatch.api("GET", "/v1/jobs")
    waiting = jobmatch("jobs", "list", "--state", "waiting", "-o", "json").json()
    assert [job["id"] for job in waiting["items"]] == [1, 3]
    category = jobmatch("jobs", "list", "--category", str(refused["category_id"]), "-o", "json")
    assert [job["id"] for job in category.json()["items"]] == [2]
    wide = jobmatch("jobs", "list", "-o", "wide")
    assert "No suitable worker found" in wide.stdout and f"resources={JAVA14}" in wide.stdout


def test_submit_from_a_file_and_the_command_after_dashes(
    jobmatch: Jobmatch, tmp_path: Path
) -> None:
    register_workers(jobmatch)
    body = tmp_path / "job.json"
    body.write_text(json.dumps({"resources": JAVA12, "slots": 1, "priority": 1}))
    job = submit(jobmatch, "--file", str(body), "--priority", "7")
    assert (job["resources"], job["priority"]) == (JAVA12, 7)
    task = jobmatch("jobs", "submit", "--resources", JAVA12, "-o", "json", "--", "echo", "-n")
    assert task.json()["command"] == ["echo", "-n"]
    broken = jobmatch("jobs", "submit", "--constraint", "{not json")
    assert broken.code == 2 and broken.stderr.startswith("error: --constraint is not JSON")


def test_an_invalid_notation_is_one_line_naming_its_position(jobmatch: Jobmatch) -> None:
    bad = jobmatch("jobs", "submit", "--resources", "a:::")
    assert bad.code == 1 and bad.stdout == ""
    assert bad.stderr.startswith("error: 422 ")
    assert "position" in bad.stderr and "expected" in bad.stderr
    assert bad.stderr.count("\n") == 1
    assert jobmatch.api("GET", "/v1/jobs")["items"] == []


def test_explain_says_why_each_worker_can_or_cannot(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    submit(jobmatch, "--resources", JAVA12)
    explained = jobmatch("jobs", "explain", "1")
    assert explained.code == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == "job 1:"
    rows = {line.split()[0]: line for line in lines[3:] if line.strip()}
    assert rows["w1"].split()[:4] == ["w1", "yes", "-", "fits"]
    assert rows["n0"].split()[:3] == ["n0", "no", "job-requires-tag"]
    assert "the job requires tag 'java' in group 'language'" in rows["n0"]
    assert jobmatch("jobs", "explain", "1", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/jobs/1/explain"
    )
    one = jobmatch("jobs", "explain", "1", "--worker", "n0", "-o", "json").json()
    assert [row["worker"] for row in one["workers"]] == ["n0"]
    assert "EVERY CLAUSE" in jobmatch("jobs", "explain", "1", "-o", "wide").stdout


def test_cancel_and_cancelling_twice_is_refused(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    submit(jobmatch, "--resources", JAVA12)
    cancelled = jobmatch("jobs", "cancel", "1")
    assert (cancelled.code, cancelled.stdout) == (0, "job 1: cancelled\n")
    again = jobmatch("jobs", "cancel", "1")
    assert again.code == 1 and again.stderr.startswith("error: 409 Conflict: ")


def test_mine_keeps_the_jobs_this_token_submitted(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    alice = jobmatch.api("POST", "/v1/tokens", {"role": "submitter", "subject": "alice"})
    as_alice = Jobmatch(jobmatch.server, alice["token"])
    submit(jobmatch, "--resources", JAVA12)
    submit(as_alice, "--resources", JAVA12)
    submit(jobmatch, "--resources", JAVA12)

    def ids(who: Jobmatch, *args: str) -> list[int]:
        return [job["id"] for job in who("jobs", "list", *args, "-o", "json").json()["items"]]

    assert ids(jobmatch) == [1, 2, 3]
    assert ids(jobmatch, "--mine") == [1, 3]
    assert ids(jobmatch, "--mine", "--limit", "1") == [1]
    assert ids(as_alice) == [2]
    assert ids(as_alice, "--mine") == [2]
