"""Crash safety (issue 8): SIGKILL the server in the middle of a load of submits, pulls
and finishes, restart it, and check that nothing acknowledged was lost and that every
booking equals what running jobs hold. Then drain the queue to the end.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Job, JobState
from app.matching.invariants import violations

ADMIN = "crash-admin"
WORKERS = 6
LOAD_SECONDS = 3.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`jobmatch serve` in a child process on a loopback port."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.port = _free_port()
        self.log = tmp / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "JOBMATCH_DATABASE_URL": self.url,
            "JOBMATCH_ADMIN_TOKEN": ADMIN,
            "JOBMATCH_LOG_LEVEL": "WARNING",
            "JOBMATCH_LEASE_SWEEP_SECONDS": "0",
        }
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "app.cli",
                    "serve",
                    "--port",
                    str(self.port),
                    "--no-migrate",
                ],
                env=env,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"server did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def request(
        self, method: str, path: str, body: Any = None, token: str = ADMIN
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            payload = None if body is None else json.dumps(body)
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            connection.close()


@pytest.fixture
def server(database_url: str, database: Database, tmp_path: Path) -> Iterator[Server]:
    running = Server(database_url, tmp_path)
    running.start()
    yield running
    running.stop()


def test_sigkill_mid_load_loses_nothing(server: Server, database: Database) -> None:
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
            except OSError:
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
            except OSError:
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
