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


def test_a_server_url_mistake_is_one_line_naming_the_url_to_give() -> None:
    """Issue 39: a URL without a scheme, or with the API's /v1, gets a hint, before any
    request (nothing listens at these addresses: a request would be exit 3)."""
    cases = {
        "localhost:1": "the server URL 'localhost:1' (--url, JOBMATCH_URL) has no scheme: "
        "give http://localhost:1 (or https://)",
        "http://127.0.0.1:1/v1": "the server URL 'http://127.0.0.1:1/v1' (--url, "
        "JOBMATCH_URL) ends with /v1: give the server's root, http://127.0.0.1:1 (each "
        "request adds /v1)",
        "http://127.0.0.1:1/jobmatch/v1/": "the server URL 'http://127.0.0.1:1/jobmatch/v1/' "
        "(--url, JOBMATCH_URL) ends with /v1: give the server's root, "
        "http://127.0.0.1:1/jobmatch (each request adds /v1)",
        "ftp://127.0.0.1:1": "the server URL 'ftp://127.0.0.1:1' (--url, JOBMATCH_URL) must "
        "start with http:// or https://",
    }
    for url, line in cases.items():
        result = run_jobmatch("jobs", "list", "--url", url)
        assert (result.code, result.stdout, result.stderr) == (
            ExitCode.USAGE,
            "",
            f"error: {line}\n",
        )
        from_environment = run_jobmatch("workers", "list", env={"JOBMATCH_URL": url})
        assert from_environment.stderr == f"error: {line}\n"
    agent = run_jobmatch("worker", "--url", "localhost:1")
    assert (agent.code, agent.stderr) == (
        ExitCode.USAGE,
        "error: the server URL 'localhost:1' (--url, JOBMATCH_URL) has no scheme: give "
        "http://localhost:1 (or https://) (see 'jobmatch worker --help')\n",
    )


def test_a_postgres_database_url_is_one_line_naming_the_url_to_give() -> None:
    for scheme in ("postgres", "postgresql"):
        url = f"{scheme}://jm:secret@127.0.0.1:1/jm"
        line = (
            f"error: the database URL '{scheme}://jm:***@127.0.0.1:1/jm' starts with "
            f"{scheme}://, which jobmatch cannot use: give "
            "'postgresql+psycopg://jm:***@127.0.0.1:1/jm' (psycopg 3)\n"
        )
        for args in (["db", "current"], ["db", "upgrade"], ["serve", "--port", "1"]):
            result = run_jobmatch(*args, env={"JOBMATCH_DATABASE_URL": url})
            assert (result.code, result.stdout, result.stderr) == (ExitCode.USAGE, "", line)
        demo = run_jobmatch("demo", "--database-url", url)
        assert (demo.code, demo.stderr) == (ExitCode.USAGE, line)
