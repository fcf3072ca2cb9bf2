"""Issue 41's "done when", against a live `jobmatch serve` on both databases: two
submitters, one floods 100 jobs first, the other submits 10 after. With fair share on
(JOBMATCH_ORDERING=fair-share,priority,age) the second's jobs start at the next pulls,
explain of a waiting job of the flood names the jobs ahead of it and the rule, and
`jobmatch shares list` shows usage against share; with today's order they start after
the flood."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.engine import Database
from tests.cli.conftest import Jobmatch
from tests.live_server import LiveServer


@pytest.fixture
def fair_server(database_url: str, database: Database, tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={"JOBMATCH_ORDERING": "fair-share,priority,age", "JOBMATCH_LEASE_SWEEP_SECONDS": "0"},
    )
    server.start()
    yield server
    server.stop()


def _submitter(server: LiveServer, name: str) -> str:
    status, answer = server.request("POST", "/v1/tokens", {"role": "submitter", "subject": name})
    assert status == 201, answer
    return str(answer["token"])


def _flood_then_ten(server: LiveServer) -> tuple[list[int], list[int], str]:
    """alice floods 100 jobs, a worker runs one of them to its end, bob submits 10; the
    ids of each, and the worker's token."""
    alice, bob = _submitter(server, "alice"), _submitter(server, "bob")
    status, worker = server.request("POST", "/v1/workers", {"name": "w", "slots": 20})
    assert status == 201, worker
    token = str(worker["token"])
    status, flood = server.request("POST", "/v1/jobs/bulk", {"jobs": [{}] * 100}, alice)
    assert status == 201, flood
    flood_ids = [job["id"] for job in flood["jobs"]]
    status, first = server.request("POST", "/v1/workers/w/pull", token=token)
    assert (status, first["id"]) == (200, flood_ids[0])
    status, _ = server.request(
        "POST", f"/v1/jobs/{first['id']}/finish", {"outcome": "finished"}, token
    )
    assert status == 200
    status, late = server.request("POST", "/v1/jobs/bulk", {"jobs": [{}] * 10}, bob)
    assert status == 201, late
    return flood_ids, [job["id"] for job in late["jobs"]], token


def _pulls(server: LiveServer, token: str, count: int) -> list[int]:
    taken = []
    for _ in range(count):
        status, job = server.request("POST", "/v1/workers/w/pull", token=token)
        assert status == 200, job
        taken.append(job["id"])
    return taken


def test_fair_share_on_the_second_submitter_goes_next(fair_server: LiveServer) -> None:
    server = fair_server
    flood, late, token = _flood_then_ten(server)

    # Where alice's next job stands: behind bob's ten, by fair share.
    status, explained = server.request("GET", f"/v1/jobs/{flood[1]}/explain")
    assert status == 200, explained
    (verdict,) = explained["workers"]
    assert verdict["answer"] == "outranked", verdict
    message = verdict["clauses"][0]["message"]
    assert f"takes job {late[0]} first" in message
    assert "10 jobs ahead of it on this worker by the ordering fair-share, priority, age" in (
        message
    )
    assert "10 of bob (further below bob's share)" in message

    # alice used the farm, bob not: his ten start at the next ten pulls.
    assert _pulls(server, token, 10) == late
    assert _pulls(server, token, 1) == [flood[1]]

    listed = Jobmatch(server)("shares", "list")
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("ordering: fair-share,priority,age (fair share on)")
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert rows["alice"][1:4] == ["-", "1", "50.0%"] and rows["bob"][-1] == "yes"
    assert Jobmatch(server)("shares", "list", "-o", "json").json()["fair_share"] is True


def test_fair_share_off_the_flood_goes_first(shared_server: LiveServer) -> None:
    flood, late, token = _flood_then_ten(shared_server)
    assert _pulls(shared_server, token, 19) == flood[1:20]
    status, explained = shared_server.request("GET", f"/v1/jobs/{late[0]}/explain")
    assert status == 200
    message = explained["workers"][0]["clauses"][0]["message"]
    assert "80 jobs ahead of it on this worker by the ordering priority, age: 80 older of" in (
        message
    )
