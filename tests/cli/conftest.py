"""A live `jobmatch serve` and a way to run the `jobmatch` program against it, for the
command line's tests: the program runs as a child process, as a user or a script runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer

ADMIN = LIVE_ADMIN_TOKEN
#: Wide enough that no table row is folded in the tests' assertions.
COLUMNS = "220"


@dataclass(frozen=True)
class Run:
    """One run of the program: its exit code and what it wrote."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


def run_jobmatch(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Run:
    """`python -m app.cli ARGS` with a clean JOBMATCH_ environment plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("JOBMATCH_")}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env={**base, "COLUMNS": COLUMNS, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(result.returncode, result.stdout, result.stderr)


class Jobmatch:
    """The program pointed at one server (JOBMATCH_URL) with one token (JOBMATCH_TOKEN)."""

    def __init__(self, server: LiveServer, token: str | None = ADMIN) -> None:
        self.server = server
        self.token = token

    def __call__(self, *args: str) -> Run:
        env = {"JOBMATCH_URL": self.server.base_url}
        if self.token is not None:
            env["JOBMATCH_TOKEN"] = self.token
        return run_jobmatch(*args, env=env)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """The API's own answer, for comparing with `-o json` (admin token)."""
        status, answer = self.server.request(method, path, body)
        assert status < 300, (status, answer)
        return answer


@pytest.fixture
def server(shared_server: LiveServer) -> LiveServer:
    """The test process's shared server, its tables empty (tests/conftest.py)."""
    return shared_server


@pytest.fixture
def jobmatch(server: LiveServer) -> Jobmatch:
    return Jobmatch(server)


#: Two workers: w1 offers java 8/11/12 on 2 slots; n0 has an RFC 14 inventory.
WORKERS = (
    {"name": "w1", "resources": "language: ?java, ?python; java: ?8, ?11, ?12", "slots": 2},
    {"name": "n0", "rank": 1, "slots": 8, "inventory": "node/[socket=2/[core=16;gpu=2]]"},
)


def register_workers(jobmatch: Jobmatch) -> None:
    for worker in WORKERS:
        jobmatch.api("POST", "/v1/workers", worker)
