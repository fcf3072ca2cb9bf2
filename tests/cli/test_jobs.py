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
    first_line, second_line = shown.stdout.splitlines()[:2]
    first = int(first_line.removeprefix("id:"))
    assert second_line == "state:     waiting"
    assert f"request:   resources={JAVA12}" in shown.stdout.splitlines()
    refused = submit(jobmatch, "--resources", JAVA14)
    assert refused["state"] == "failed" and refused["failure_reason"] == "No suitable worker found"
    # A job in another notation.
    third = submit(jobmatch, "--requires", "host:n[0-1]", "--shape", "slot/core=4")
    assert third["state"] == "waiting"
    ids = [first, refused["id"], third["id"]]

    shown_json = jobmatch("jobs", "show", str(first), "-o", "json").json()
    assert shown_json == jobmatch.api("GET", f"/v1/jobs/{first}")
    listed = jobmatch("jobs", "list")
    assert listed.code == 0, listed.stderr
    rows = [row.split()[:2] for row in listed.stdout.splitlines()[2:]]
    assert rows == [[str(ids[0]), "waiting"], [str(ids[1]), "failed"], [str(ids[2]), "waiting"]]
    assert jobmatch("jobs", "list", "-o", "json").json() == jobmatch.api("GET", "/v1/jobs")
    waiting = jobmatch("jobs", "list", "--state", "waiting", "-o", "json").json()
    assert [job["id"] for job in waiting["items"]] == [ids[0], ids[2]]
    category = jobmatch("jobs", "list", "--category", str(refused["category_id"]), "-o", "json")
    assert [job["id"] for job in category.json()["items"]] == [ids[1]]
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
    job = str(submit(jobmatch, "--resources", JAVA12)["id"])
    explained = jobmatch("jobs", "explain", job)
    assert explained.code == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == f"job {job}:"
    rows = {line.split()[0]: line for line in lines[3:] if line.strip()}
    # Columns by word, so that a server that adds STATE and CAN RUN NOW passes too.
    assert "yes" in rows["w1"].split() and "job-requires-tag" not in rows["w1"]
    assert rows["w1"].rstrip().endswith(("fits", "can run it now"))
    assert {"no", "job-requires-tag"} <= set(rows["n0"].split())
    assert "the job requires tag 'java' in group 'language'" in rows["n0"]
    assert jobmatch("jobs", "explain", job, "-o", "json").json() == jobmatch.api(
        "GET", f"/v1/jobs/{job}/explain"
    )
    one = jobmatch("jobs", "explain", job, "--worker", "n0", "-o", "json").json()
    assert [row["worker"] for row in one["workers"]] == ["n0"]
    assert "EVERY CLAUSE" in jobmatch("jobs", "explain", job, "-o", "wide").stdout


def test_cancel_and_cancelling_twice_is_refused(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    job = str(submit(jobmatch, "--resources", JAVA12)["id"])
    cancelled = jobmatch("jobs", "cancel", job)
    assert (cancelled.code, cancelled.stdout) == (0, f"job {job}: cancelled\n")
    again = jobmatch("jobs", "cancel", job)
    assert again.code == 1 and again.stderr.startswith("error: 409 Conflict: ")


def test_mine_keeps_the_jobs_this_token_submitted(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    alice = jobmatch.api("POST", "/v1/tokens", {"role": "submitter", "subject": "alice"})
    as_alice = Jobmatch(jobmatch.server, alice["token"])
    first, second, third = (
        submit(who, "--resources", JAVA12)["id"] for who in (jobmatch, as_alice, jobmatch)
    )

    def ids(who: Jobmatch, *args: str) -> list[int]:
        return [job["id"] for job in who("jobs", "list", *args, "-o", "json").json()["items"]]

    assert ids(jobmatch) == [first, second, third]
    assert ids(jobmatch, "--mine") == [first, third]
    assert ids(jobmatch, "--mine", "--limit", "1") == [first]
    assert ids(as_alice) == [second]
    assert ids(as_alice, "--mine") == [second]


def test_grid_engine_queue_lists_are_submitted_shown_and_refused_with_their_position(
    jobmatch: Jobmatch,
) -> None:
    """qsub(1) -q, -masterq and -soft -q as `jobmatch jobs submit -q/--masterq/--soft-queue`
    (each item must name an existing queue instance: qref_list_is_valid())."""
    queues = [{"name": "all.q", "slots": 2}, {"name": "fast.q", "slots": 1}]
    jobmatch.api("POST", "/v1/workers", {"name": "h1", "queues": queues})
    jobmatch.api("PUT", "/v1/pes/mpi", {"allocation_rule": "$fill_up"})
    shown = jobmatch(
        "jobs",
        "submit",
        "-q",
        "all.q@h*",
        "--masterq",
        "all.q@h1",
        "--soft-queue",
        "fast.q",
        "--pe",
        "mpi",
        "--pe-slots",
        "2",
    )
    assert shown.code == 0, shown.stderr
    request = next(line for line in shown.stdout.splitlines() if line.startswith("request:"))
    assert request.split(None, 1)[1] == (
        "pe=mpi; queue_list=all.q@h*; master_queue_list=all.q@h1; soft_queue_list=fast.q"
    )
    bad = jobmatch("jobs", "submit", "-q", "all.q,,b.q")
    assert bad.code == 1 and bad.stdout == ""
    assert bad.stderr.startswith("error: 422 ") and bad.stderr.count("\n") == 1
    assert "qsub -q" in bad.stderr and "position 6" in bad.stderr


def test_submit_an_array_job_with_t_and_tc(jobmatch: Jobmatch) -> None:
    """qsub -t n[-m[:s]] and -tc (qsub(1), Grid Engine 6.2u5) as `jobs submit -t --tc`,
    through POST /v1/jobs/bulk."""
    register_workers(jobmatch)
    answer = jobmatch(
        "jobs", "submit", "--resources", JAVA12, "-t", "1-100:2", "--tc", "4", "-o", "json",
        "--", "./render.sh",
    ).json()  # fmt: skip
    assert answer["count"] == 50
    assert [job["task_id"] for job in answer["jobs"]] == list(range(1, 100, 2))
    assert {job["state"] for job in answer["jobs"]} == {"waiting"}
    task = jobmatch.api("GET", f"/v1/jobs/{answer['jobs'][1]['id']}")
    assert (task["task_id"], task["task_range"], task["command"]) == (3, "1-99:2", ["./render.sh"])
    table = jobmatch("jobs", "submit", "-t", "5-6", "--anything")
    assert table.code == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["ID", "STATE", "ARRAY", "TASK", "FAILURE"]
    assert [row.split()[3] for row in table.stdout.splitlines()[2:]] == ["5", "6"]
    bad = jobmatch("jobs", "submit", "-t", "5-3", "--anything")
    assert bad.code != 0 and "qsub -t" in bad.stderr


def test_submit_many_from_json_lines_and_a_json_list(jobmatch: Jobmatch, tmp_path: Path) -> None:
    register_workers(jobmatch)
    lines = tmp_path / "jobs.jsonl"
    lines.write_text(
        "\n".join(json.dumps({"resources": JAVA12, "priority": n}) for n in range(5))
        + "\n\n"
        + json.dumps({"resources": JAVA14})
        + "\n"
    )
    answer = jobmatch("jobs", "submit-many", str(lines), "--chunk", "2", "-o", "json").json()
    assert answer["count"] == 6
    assert [job["state"] for job in answer["jobs"]] == ["waiting"] * 5 + ["failed"]
    ids = [job["id"] for job in answer["jobs"]]
    assert ids == sorted(ids)
    listed = tmp_path / "jobs.json"
    listed.write_text(json.dumps([{"resources": JAVA12}, {"tasks": "1-3"}]))
    table = jobmatch("jobs", "submit-many", str(listed))
    assert table.code == 0, table.stderr
    assert len(table.stdout.splitlines()) == 2 + 4
    # A refused body: nothing of its request is stored, and the error names it.
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{}, {"resources": "language: ;;;"}]))
    refused = jobmatch("jobs", "submit-many", str(broken))
    assert refused.code != 0 and "jobs.1.resources" in refused.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert jobmatch("jobs", "submit-many", str(garbage)).code == 2
