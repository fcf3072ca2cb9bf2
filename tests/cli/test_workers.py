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


def test_drain_and_resume_keep_the_rest_of_the_worker(jobmatch: Jobmatch) -> None:
    """Issue 21: draining through POST /v1/workers lost resources, slots and rank; the
    command line drains with PATCH, which changes the state and its reason only."""
    register_workers(jobmatch)
    before = jobmatch.api("GET", "/v1/workers/w1")
    drained = jobmatch("workers", "drain", "w1", "--reason", "kernel upgrade")
    assert (drained.code, drained.stdout) == (0, "worker w1: draining (kernel upgrade)\n")
    after = jobmatch.api("GET", "/v1/workers/w1")
    assert (after["state"], after["state_reason"], after["state_set_by"]) == (
        "draining",
        "kernel upgrade",
        "admin",
    )
    for kept in ("resources", "queues", "rank", "properties", "inventory"):
        assert after[kept] == before[kept], kept
    listed = jobmatch("workers", "list").stdout.splitlines()
    assert any(row.split()[:4] == ["w1", "draining", "(kernel", "upgrade)"] for row in listed)

    resumed = jobmatch("workers", "resume", "w1", "-o", "json").json()
    assert resumed == jobmatch.api("GET", "/v1/workers/w1")
    assert (resumed["state"], resumed["state_reason"]) == ("active", None)
    assert resumed["resources"] == before["resources"]
    assert jobmatch("workers", "drain", "w1").code == 2  # --reason is required


def test_delete_refuses_a_busy_worker_unless_requeue(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    worker_token = jobmatch.api("POST", "/v1/workers", {"name": "w2", "slots": 1})["token"]
    job = jobmatch.api("POST", "/v1/jobs", {"resources": ""})["id"]
    status, pulled = jobmatch.server.request("POST", "/v1/workers/w2/pull", token=worker_token)
    assert status == 200 and pulled["id"] == job

    busy = jobmatch("workers", "delete", "w2")
    assert busy.code == 1 and busy.stderr.startswith("error: 409 Conflict: ")
    requeued = jobmatch("workers", "delete", "w2", "--requeue")
    assert (requeued.code, requeued.stdout) == (0, "worker w2: deleted (its jobs requeued)\n")
    assert jobmatch.api("GET", f"/v1/jobs/{job}")["state"] == "waiting"
    assert jobmatch("workers", "delete", "n0", "-o", "json").stdout == ""
    names = [w["name"] for w in jobmatch.api("GET", "/v1/workers")["items"]]
    assert names == ["w1"]
    assert jobmatch("workers", "delete", "n0").code == 1
