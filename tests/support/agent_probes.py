"""Helpers of the issue 19 probes: a live server with short leases, real `jobmatch worker`
agents, and a job whose work runs in a grandchild process that writes "start PID" and
"end PID" lines to a marker file, so that overlapping runs would show."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from tests.live_server import LiveServer

JOBMATCH = str(Path(sys.executable).with_name("jobmatch"))

#: The work: a first run sleeps long (it is meant to be cut short), a later one briefly.
_WORK = """
import os, sys, time
marker = sys.argv[1]
again = os.path.exists(marker) and "start" in open(marker).read()
with open(marker, "a") as out:
    out.write(f"start {os.getpid()} {time.time()}\\n")
time.sleep(0.5 if again else float(sys.argv[2]))
with open(marker, "a") as out:
    out.write(f"end {os.getpid()} {time.time()}\\n")
"""
#: The command: a parent that runs the work as its child, so the work is a grandchild of
#: whatever starts the command (a parent-death signal on the command alone misses it).
_PARENT = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, *sys.argv[1:]]))"


def marker_job(marker: Path, first_run_seconds: float) -> dict[str, Any]:
    command = [sys.executable, "-c", _PARENT, "-c", _WORK, str(marker), str(first_run_seconds)]
    return {"command": command}


def runs(marker: Path) -> list[tuple[str, int, float]]:
    """The marker's lines as (start|end, pid, time)."""
    if not marker.exists():
        return []
    lines = [line.split() for line in marker.read_text().splitlines() if line.strip()]
    return [(kind, int(pid), float(at)) for kind, pid, at in lines]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached in {timeout} s")


def call(
    server: LiveServer, method: str, path: str, body: Any = None, token: str | None = None
) -> Any:
    status, answer = server.request(method, path, body, token)
    assert status < 300, (method, path, status, answer)
    return answer


def register(server: LiveServer, name: str) -> str:
    token: str = call(server, "POST", "/v1/workers", {"name": name, "slots": 1})["token"]
    return token


def history(server: LiveServer, job_id: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = call(server, "GET", f"/v1/jobs/{job_id}/history")["events"]
    return events


class Agents:
    """`jobmatch worker` processes of one test, each with its spool in the test's
    directory; whatever still runs at the end is killed."""

    def __init__(self, server: LiveServer, directory: Path) -> None:
        self.server = server
        self.directory = directory
        self.started: list[subprocess.Popen[bytes]] = []

    def spool(self, name: str) -> Path:
        return self.directory / f"spool-{name}"

    def start(self, name: str, token: str, *extra: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "JOBMATCH_WORKER_TOKEN": token,
            "JOBMATCH_AGENT_SPOOL": str(self.spool(name)),
        }
        command = [JOBMATCH, "worker", "--server", self.server.base_url, "--name", name]
        command += ["--poll-interval", "0.2", "--heartbeat-interval", "0.3", *extra]
        with (self.directory / f"agent-{name}.log").open("ab") as log:
            agent = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        self.started.append(agent)
        return agent

    def spooled(self, name: str, job_id: int) -> dict[str, Any]:
        """The agent's spool entry of the job, once it records the job's process group."""

        def entry() -> dict[str, Any] | None:
            try:
                data: dict[str, Any] = json.loads(
                    (self.spool(name) / f"job-{job_id}.json").read_text()
                )
            except (OSError, ValueError):
                return None
            return data if data.get("pgid") else None

        found: dict[str, Any] = wait_for(entry, what=f"spool entry of job {job_id}")
        return found

    def stop_all(self) -> None:
        for agent in self.started:
            if agent.poll() is None:
                agent.send_signal(signal.SIGKILL)
            agent.wait(timeout=10)


@pytest.fixture
def short_lease_server(
    request: pytest.FixtureRequest, database_url: str, database: Database, tmp_path: Path
) -> Iterator[LiveServer]:
    """A live server whose leases last 2 s (or the test module's LEASE_SECONDS), swept
    every 0.2 s."""
    lease = getattr(request.module, "LEASE_SECONDS", 2)
    server = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={"JOBMATCH_LEASE_SECONDS": str(lease), "JOBMATCH_LEASE_SWEEP_SECONDS": "0.2"},
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def agents(short_lease_server: LiveServer, tmp_path: Path) -> Iterator[Agents]:
    started = Agents(short_lease_server, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
