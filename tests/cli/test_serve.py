"""`jobmatch serve` as a person starts it (issue 39): a taken port is one `error:` line and
exit code 2 before anything is done; every server process says where it listens; the text
log carries each event's fields."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import run_jobmatch
from tests.databases import migrated_database, run_directory
from tests.live_server import LiveServer, free_port


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", free_port()))
        other.listen()
        yield int(other.getsockname()[1])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_taken_port_is_one_error_line_and_nothing_is_done(
    taken_port: int, tmp_path: Path, workers: str
) -> None:
    database = tmp_path / "never.db"
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "counter_1.db").write_text("a running server's metrics")
    result = run_jobmatch(
        "serve",
        "--port",
        str(taken_port),
        "--workers",
        workers,
        env={
            "JOBMATCH_DATABASE_URL": f"sqlite:///{database}",
            "JOBMATCH_LOG_FORMAT": "text",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        },
    )
    assert result.code == 2, result
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: cannot listen on http://127.0.0.1:{taken_port}: the port is taken (another "
        "server is running there?); stop it, or choose another port (jobmatch serve --port N, "
        "make run PORT=N)"
    ]
    # Nothing was started: no database created or migrated, no log line, and the metrics
    # directory (the running server's, perhaps) was not emptied.
    assert not database.exists()
    assert (metrics / "counter_1.db").exists()


def test_an_address_not_of_this_machine_is_one_error_line(tmp_path: Path) -> None:
    port = free_port()
    result = run_jobmatch(
        "serve",
        "--host",
        "192.0.2.1",  # TEST-NET-1 (RFC 5737): no machine has it
        "--port",
        str(port),
        env={"JOBMATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'never.db'}"},
    )
    assert result.code == 2, result
    assert result.stderr.splitlines() == [
        f"error: cannot listen on http://192.0.2.1:{port}: "
        "'192.0.2.1' is not an address of this machine"
    ]


@pytest.fixture
def text_logging_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """`jobmatch serve --workers 2` with make run's text log at INFO, on SQLite."""
    with migrated_database("sqlite", tmp_path, run_directory(request.config)) as url:
        server = LiveServer(
            url,
            tmp_path / "server.log",
            args=("--workers", "2"),
            env={"JOBMATCH_LOG_FORMAT": "text", "JOBMATCH_LOG_LEVEL": "INFO"},
        )
        server.start(timeout=120)
        try:
            server.wait_for_processes(2)
            yield server
        finally:
            server.stop()


def test_each_server_process_says_where_it_listens_and_events_carry_their_fields(
    text_logging_server: LiveServer,
) -> None:
    server = text_logging_server
    log = server.log.read_text()
    listening = re.findall(
        rf"app\.api\.app: listening on http://127\.0\.0\.1:{server.port} \(process (\d+)\)$",
        log,
        re.MULTILINE,
    )
    assert server.process is not None
    # One line per worker process, each naming its own process (not the supervisor).
    assert len(set(listening)) == 2, log
    assert str(server.process.pid) not in listening
    assert all(os.path.exists(f"/proc/{pid}") for pid in listening)

    status, registered = server.request(
        "POST", "/v1/workers", {"name": "w1", "resources": "language: ?python"}
    )
    assert status == 201, registered
    status, job = server.request("POST", "/v1/jobs", {"resources": "language: python"})
    assert status == 201, job
    status, pulled = server.request("POST", "/v1/workers/w1/pull", token=registered["token"])
    assert status == 200 and pulled["id"] == job["id"], pulled
    log = server.log.read_text()
    # The text log says which job went to which worker, as the JSON lines do.
    assert re.search(
        rf"app\.events: job\.dispatched job_id={job['id']} worker=w1\b", log, re.MULTILINE
    ), log
    assert re.search(r"app\.events: worker\.registered worker=w1\b", log), log
