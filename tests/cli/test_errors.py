"""Exit codes and error lines of the remote commands (issue 21): one line on stderr, never a
traceback; 3 when the server cannot be reached, 4 when the token is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from app.cli.errors import ExitCode
from tests.cli.conftest import Jobmatch, run_jobmatch
from tests.live_server import free_port


def test_an_unreachable_server_is_one_line_with_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["workers", "list"], ["jobs", "show", "1"], ["tasks", "list"]):
        result = run_jobmatch(*args, "--url", url)
        assert result.code == ExitCode.UNREACHABLE, result
        assert result.stdout == ""
        assert result.stderr.startswith(f"error: cannot reach the jobmatch server at {url} (")
        assert result.stderr.count("\n") == 1, result.stderr


def test_the_url_and_token_come_from_the_environment_too() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_jobmatch("attributes", "list", env={"JOBMATCH_URL": url})
    assert result.code == ExitCode.UNREACHABLE
    assert url in result.stderr


def test_a_refused_token_and_a_missing_one(jobmatch: Jobmatch) -> None:
    bad = Jobmatch(jobmatch.server, "not-a-token")("workers", "list")
    assert bad.code == ExitCode.AUTH and bad.stdout == ""
    assert bad.stderr == (
        "error: the token was refused (401 Unauthorized: the bearer token is unknown or "
        "revoked); pass --token or set JOBMATCH_TOKEN\n"
    )
    missing = Jobmatch(jobmatch.server, None)("jobs", "list")
    assert missing.code == ExitCode.AUTH
    assert missing.stderr.startswith("error: no token given (401 Unauthorized: ")


def test_a_role_that_may_not_is_refused_with_code_4(jobmatch: Jobmatch) -> None:
    worker = jobmatch.api("POST", "/v1/workers", {"name": "w1"})
    as_worker = Jobmatch(jobmatch.server, worker["token"])("jobs", "submit", "--resources", "x")
    assert as_worker.code == ExitCode.AUTH
    assert as_worker.stderr.startswith("error: the token may not do this (403 Forbidden: ")


def test_a_usage_error_exits_2_without_calling_the_server() -> None:
    result = run_jobmatch("jobs", "list", "--state", "sleeping", "--url", "http://127.0.0.1:1")
    assert result.code == ExitCode.USAGE
    assert result.stderr.startswith("error: invalid value for --state: 'sleeping' is not one of")
    assert result.stderr.count("\n") == 1


def test_a_server_that_is_not_jobmatch_is_exit_5(tmp_path: Path) -> None:
    """A proxy or another program on the port: its answer is not the API's JSON."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "workers").write_text("<html>not jobmatch</html>")
    port = free_port()
    other = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            result = run_jobmatch("workers", "list", "--url", url)
            if result.code != ExitCode.UNREACHABLE or time.monotonic() > deadline:
                break
        assert result.code == ExitCode.SERVER, result
        assert result.stderr.startswith("error: GET /v1/workers: answer is not JSON")
        assert result.stderr.count("\n") == 1
    finally:
        other.terminate()
        other.wait(timeout=10)
