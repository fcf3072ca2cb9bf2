"""Crash safety (issue 8): SIGKILL the server in the middle of a load of submits, pulls
and finishes, restart it, and check that nothing acknowledged was lost and that every
booking equals what running jobs hold. Then drain the queue to the end.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.engine import Database
from app.db.models import Job, JobState
from app.matching.invariants import violations
from tests.live_server import LiveServer

ADMIN = "crash-admin"
WORKERS = 6
LOAD_SECONDS = 3.0
#: What a client sees when the server dies under it: a refused or reset connection, or an
#: answer cut off mid-body (http.client.IncompleteRead, which is no OSError).
SERVER_GONE = (OSError, http.client.HTTPException)


@pytest.fixture
def server(database_url: str, database: Database, tmp_path: Path) -> Iterator[LiveServer]:
    running = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={"JOBMATCH_LEASE_SWEEP_SECONDS": "0"},
        admin_token=ADMIN,
    )
    running.start()
    yield running
    running.stop()


def test_sigkill_mid_load_loses_nothing(server: LiveServer, database: Database) -> None:
    tokens = {}
    for index in range(WORKERS):
        status, body = server.request(
            "POST", "/v1/workers", {"name": f"w{index}", "slots": 1 + index % 3}
        )
        assert status == 201
        tokens[f"w{index}"] = body["token"]

    acknowledged: set[int] = set()
    finished: set[int] = set()
    stop = threading.Event()

    def submitter() -> None:
        while not stop.is_set():
            try:
                status, body = server.request(
                    "POST", "/v1/jobs", {"slots": 1 + len(acknowledged) % 2}
                )
                if status == 201:
                    acknowledged.add(body["id"])
            except SERVER_GONE:
                time.sleep(0.05)

    def worker(name: str) -> None:
        while not stop.is_set():
            try:
                status, body = server.request(
                    "POST", f"/v1/workers/{name}/pull", token=tokens[name]
                )
                if status == 200:
                    done, _ = server.request(
                        "POST",
                        f"/v1/jobs/{body['id']}/finish",
                        {"outcome": "finished"},
                        token=tokens[name],
                    )
                    if done == 200:
                        finished.add(body["id"])
                else:
                    time.sleep(0.02)
            except SERVER_GONE:
                time.sleep(0.05)

    threads = [threading.Thread(target=submitter) for _ in range(2)]
    threads += [threading.Thread(target=worker, args=(name,)) for name in tokens]
    for thread in threads:
        thread.start()
    time.sleep(LOAD_SECONDS)
    server.kill()  # in the middle of everything
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert acknowledged and finished, "the load did nothing before the kill"

    server.start()
    with database.transaction(write=False) as session:
        assert violations(session) == []
        states = {job.id: job.state for job in session.query(Job)}
    assert acknowledged <= set(states), "an acknowledged submission was lost"
    assert all(states[job] is JobState.FINISHED for job in finished)

    # Jobs that were running when the server died still belong to live workers: let each
    # worker report them, then drain the queue; the books must stay straight throughout.
    for job_id, state in states.items():
        if state is JobState.RUNNING:
            with database.transaction(write=False) as session:
                holder = session.get(Job, job_id)
                assert holder is not None and holder.worker_id is not None
            owner = next(
                n for n in tokens if server.request("GET", f"/v1/jobs/{job_id}")[1]["worker"] == n
            )
            assert (
                server.request(
                    "POST",
                    f"/v1/jobs/{job_id}/finish",
                    {"outcome": "finished"},
                    token=tokens[owner],
                )[0]
                == 200
            )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pulled = 0
        for name, token in tokens.items():
            status, body = server.request("POST", f"/v1/workers/{name}/pull", token=token)
            if status == 200:
                pulled += 1
                assert (
                    server.request(
                        "POST",
                        f"/v1/jobs/{body['id']}/finish",
                        {"outcome": "finished"},
                        token=token,
                    )[0]
                    == 200
                )
        if not pulled:
            break
    with database.transaction(write=False) as session:
        assert violations(session) == []
        left = {job.id: job.state for job in session.query(Job)}
    assert all(state is JobState.FINISHED for state in left.values()), left
    print(
        f"acknowledged {len(acknowledged)} jobs, {len(finished)} finished before the kill, "
        f"{len(left)} in the database, all finished after the restart"
    )
