"""The worker agent against a real ``jobmatch serve`` on loopback, running real commands
(debusine issue #8: analyze_worker on the worker, refreshes, and the agent's life cycle)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from tests.conftest import ADMIN_TOKEN
from tests.support.task_plugins import install_plugins

JOBMATCH = str(Path(sys.executable).with_name("jobmatch"))
PY = sys.executable

DEBSIGN = """
class Plugin:
    version = 2

    @staticmethod
    def analyze_worker():
        return {"available": True, "keys": ["k1"]}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, token: str = ADMIN_TOKEN) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return json.loads(raw) if raw else None


def _start_server(
    database_url: str, env_extra: dict[str, str]
) -> tuple[subprocess.Popen[bytes], Server]:
    port = _free_port()
    env = {
        **os.environ,
        "JOBMATCH_DATABASE_URL": database_url,
        "JOBMATCH_ADMIN_TOKEN": ADMIN_TOKEN,
        "JOBMATCH_LOG_LEVEL": "WARNING",
        **env_extra,
    }
    process = subprocess.Popen(
        [JOBMATCH, "serve", "--no-migrate", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Server(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 30
    while True:
        try:
            server.call("GET", "/healthz")
            return process, server
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("jobmatch serve did not start") from None
            time.sleep(0.2)


@pytest.fixture
def start_server(database: Database, database_url: str) -> Iterator[Callable[..., Server]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(**env_extra: str) -> Server:
        process, server = _start_server(database_url, env_extra)
        started.append(process)
        return server

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def plugin_path(tmp_path: Path) -> str:
    install_plugins(tmp_path / "site", {"debsign": DEBSIGN})
    return str(tmp_path / "site")


def _register_worker(server: Server, name: str) -> str:
    token: str = server.call("POST", "/v1/workers", {"name": name, "slots": 1})["token"]
    return token


def _agent(
    server: Server, name: str, token: str, plugin_path: str, *extra: str
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": plugin_path, "JOBMATCH_WORKER_TOKEN": token}
    # Each test's agents keep their spool in the test's directory, not the user's.
    env["JOBMATCH_AGENT_SPOOL"] = str(Path(plugin_path).parent / f"spool-{name}")
    return subprocess.Popen(
        [
            JOBMATCH,
            "worker",
            "--server",
            server.url,
            "--name",
            name,
            "--poll-interval",
            "0.2",
            "--heartbeat-interval",
            "0.3",
            # Short long-polls: a stopped agent waits for its pull in flight (to give back
            # a job it may bring), so these tests' stops take at most this long.
            "--wait",
            "2",
            *extra,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_for(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _job_state(server: Server, job_id: int, *states: str) -> Callable[[], Any]:
    def check() -> Any:
        job = server.call("GET", f"/v1/jobs/{job_id}")
        return job if job["state"] in states else None

    return check


def test_agent_reports_facts_pulls_and_runs_real_commands(
    start_server: Callable[..., Server], plugin_path: str
) -> None:
    server = start_server()
    server.call("POST", "/v1/tasks", {"name": "shell"})
    server.call("POST", "/v1/tasks", {"name": "debsign", "version": 2, "plugin": None})
    token = _register_worker(server, "w1")
    agent = _agent(server, "w1", token, plugin_path)
    try:
        # A (re)started worker reports before it pulls (debusine issue #8).
        meta = _wait_for(
            lambda: (m := server.call("GET", "/v1/workers/w1/metadata"))["reported_at"] and m
        )
        facts = meta["effective"]
        assert facts["system:cpu_count"] == os.cpu_count()
        assert facts["system:python_version"].count(".") == 2
        assert {"system:architecture", "system:os", "system:total_physical_memory"} <= set(facts)
        assert meta["namespaces"]["shell"]["version"] == 1
        assert meta["refresh_metadata"] is False

        ok = server.call(
            "POST",
            "/v1/jobs",
            {"task": "shell", "command": [PY, "-c", "print('hello from', 6 * 7)"]},
        )
        bad = server.call(
            "POST", "/v1/jobs", {"task": "shell", "command": [PY, "-c", "import sys; sys.exit(3)"]}
        )
        slow = server.call(
            "POST",
            "/v1/jobs",
            {"task": "shell", "command": [PY, "-c", "import time; time.sleep(30)"], "timeout": 1},
        )
        done = _wait_for(_job_state(server, ok["id"], "finished", "failed"))
        assert done["state"] == "finished"
        assert done["exit_code"] == 0 and "hello from 42" in done["output"]
        failed = _wait_for(_job_state(server, bad["id"], "finished", "failed"))
        assert (failed["state"], failed["exit_code"], failed["failure_reason"]) == (
            "failed",
            3,
            "exit status 3",
        )
        timed_out = _wait_for(_job_state(server, slow["id"], "finished", "failed"))
        assert timed_out["failure_reason"] == "timed out after 1 s"
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=30) == 0


def test_plugin_analyze_worker_sets_the_namespace_and_its_version(
    start_server: Callable[..., Server], plugin_path: str
) -> None:
    """analyze_worker runs on the worker and its version (the plug-in's, 2) must match the
    registered task's; the server needs the plug-in too, so it gets the same path."""
    server = start_server(PYTHONPATH=plugin_path)
    server.call("POST", "/v1/tasks", {"name": "debsign", "version": 2, "plugin": "debsign"})
    token = _register_worker(server, "signer")
    agent = _agent(server, "signer", token, plugin_path, "--max-jobs", "1")
    try:
        _wait_for(lambda: server.call("GET", "/v1/workers/signer/metadata")["reported_at"])
        job = server.call("POST", "/v1/jobs", {"task": "debsign", "command": [PY, "-c", "0"]})
        assert job["state"] in ("waiting", "running", "finished")
        assert _wait_for(_job_state(server, job["id"], "finished"))
        meta = server.call("GET", "/v1/workers/signer/metadata")
        assert meta["namespaces"]["debsign"]["version"] == 2
        assert meta["effective"]["debsign:keys"] == ["k1"]
        assert agent.wait(timeout=30) == 0  # --max-jobs 1
    finally:
        if agent.poll() is None:
            agent.kill()


def test_sigterm_returns_a_job_that_outlives_the_grace_period(
    start_server: Callable[..., Server], plugin_path: str
) -> None:
    server = start_server()
    server.call("POST", "/v1/tasks", {"name": "shell"})
    token = _register_worker(server, "w1")
    agent = _agent(server, "w1", token, plugin_path, "--grace", "0.5")
    _wait_for(lambda: server.call("GET", "/v1/workers/w1/metadata")["reported_at"])
    job = server.call(
        "POST", "/v1/jobs", {"task": "shell", "command": [PY, "-c", "import time; time.sleep(60)"]}
    )
    _wait_for(_job_state(server, job["id"], "running"))
    started = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=30) == 0
    assert time.monotonic() - started < 15
    back = server.call("GET", f"/v1/jobs/{job['id']}")
    assert (back["state"], back["worker"], back["submitted_at"]) == (
        "waiting",
        None,
        job["submitted_at"],
    )


def test_sigterm_lets_a_short_job_finish(
    start_server: Callable[..., Server], plugin_path: str
) -> None:
    server = start_server()
    server.call("POST", "/v1/tasks", {"name": "shell"})
    token = _register_worker(server, "w1")
    agent = _agent(server, "w1", token, plugin_path, "--grace", "20")
    _wait_for(lambda: server.call("GET", "/v1/workers/w1/metadata")["reported_at"])
    job = server.call(
        "POST",
        "/v1/jobs",
        {
            "task": "shell",
            "command": [
                PY,
                "-c",
                "import time; print('started', flush=True); time.sleep(3); print('done')",
            ],
        },
    )
    # Signal once the command has started (its first line streamed), not merely once the
    # server marked the job running: a job whose pull answer arrives after the signal is
    # given back to the queue, by design.
    _wait_for(
        lambda: "started" in server.call("GET", f"/v1/jobs/{job['id']}/output?offset=0")["text"]
    )
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=30) == 0
    finished = server.call("GET", f"/v1/jobs/{job['id']}")
    assert finished["state"] == "finished" and "done" in finished["output"]


def test_agent_refreshes_metadata_when_the_server_asks(
    start_server: Callable[..., Server], plugin_path: str
) -> None:
    """debusine issue #8: the server triggers a refresh once the metadata is old (here 1 s instead
    of 24 h, JOBMATCH_METADATA_REFRESH_SECONDS); the pull response says so."""
    server = start_server(JOBMATCH_METADATA_REFRESH_SECONDS="1")
    token = _register_worker(server, "w1")
    agent = _agent(server, "w1", token, plugin_path)
    try:
        first = _wait_for(lambda: server.call("GET", "/v1/workers/w1/metadata")["reported_at"])
        later = _wait_for(
            lambda: (
                (at := server.call("GET", "/v1/workers/w1/metadata")["reported_at"]) != first and at
            ),
            timeout=20,
        )
        assert later > first
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=30) == 0
