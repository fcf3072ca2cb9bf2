"""`make run` and `make test` install what they need, from the pinned constraints.

`make run` installs the serving dependencies only, with pip's progress shown, and prints
the URL, the admin token and the database file before it serves; `make test` adds the dev
tools. constraints.txt pins every dependency both install (and the Dockerfile too).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

from packaging.requirements import Requirement

from tests.live_server import free_port

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _dry_run(target: str) -> str:
    """What `make TARGET` would run on a fresh clone (a venv that does not exist yet)."""
    result = subprocess.run(
        ["make", "-n", target, "VENV=/nonexistent/venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_constraints_pin_every_runtime_and_dev_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        requirement = Requirement(spec)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{name} missing from constraints.txt (run make lock)"
        assert requirement.specifier.contains(pins[name]), (spec, pins[name])


def test_make_run_installs_serving_dependencies_only_and_visibly() -> None:
    commands = _dry_run("run")
    installs = [line for line in commands.splitlines() if " install " in line]
    assert installs, commands
    for line in installs:
        assert "--constraint constraints.txt" in line
        assert "[dev]" not in line and "--quiet" not in line and " -q" not in line, line


def test_make_test_adds_the_dev_tools_and_runs_every_check() -> None:
    commands = _dry_run("test")
    assert any("'.[dev]'" in line and "--constraint" in line for line in commands.splitlines())
    for tool in ("ruff check", "ruff format --check", "mypy", "lint-imports", "pytest"):
        assert tool in commands, tool
    # The serial tests alone, then the rest in parallel, a process per core and one more,
    # ending with the slowest tests (issue 34).
    serial, parallel = [line for line in commands.splitlines() if "bin/pytest" in line]
    assert "-m serial" in serial and "no:xdist" in serial, serial
    assert '-m "not serial"' in parallel and f"-n {len(os.sched_getaffinity(0)) + 1}" in parallel, (
        parallel
    )
    assert parallel.endswith("--durations=15"), parallel


def test_dockerfile_installs_with_the_same_constraints() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "constraints.txt" in dockerfile.split("RUN /opt/venv/bin/pip install")[0]
    assert "pip install --constraint constraints.txt ." in dockerfile


def _make_run(port: int) -> list[str]:
    """`make run PORT=port` with the venv of the interpreter running the tests, taken as
    installed (`-o` its stamp): the test checks what `make run` does, not the install, and
    must never reinstall a venv (in a worktree, the shared one) under another checkout."""
    venv = Path(sys.prefix)
    return [
        "make",
        "--no-print-directory",
        "-o",
        str(venv / ".installed-run"),
        "run",
        f"VENV={venv}",
        f"PORT={port}",
    ]


#: What an enclosing make (CI's `make test`) passes down; without them the child is the
#: top-level make a person types, whose error line says `make:`, not `make[1]:`.
MAKE_ENVIRONMENT = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def _run_env(database: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JOBMATCH_") and k not in MAKE_ENVIRONMENT
    }
    env.update(JOBMATCH_DATABASE_URL=f"sqlite:///{database}", JOBMATCH_ADMIN_TOKEN="run-token")
    return env


def test_make_run_prints_url_token_and_database_file_then_serves(tmp_path: Path) -> None:
    """The real `make run` (with the tests' venv, already installed): the banner, and
    a server that answers /readyz."""
    port = free_port()
    database = tmp_path / "run.db"
    env = _run_env(database)
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        make = subprocess.Popen(
            _make_run(port),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and make.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/readyz"
                with urllib.request.urlopen(url, timeout=2) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(0.2)
        output = log.read_text()
        assert status == 200, output
        base = f"http://127.0.0.1:{port}"
        assert f"serving on {base} (console: {base}/ui, API docs: {base}/docs)" in output
        assert "admin token: run-token" in output
        assert f"database file: {database}" in output
        assert f"export JOBMATCH_URL={base}" in output
        # The server process says where it listens, in make run's text log.
        assert f"listening on {base} (process " in output
        assert database.is_file()
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=30)


def test_make_run_on_a_taken_port_prints_one_error_and_no_banner(tmp_path: Path) -> None:
    """Issue 39: the banner said "serving on" before the server failed to bind."""
    database = tmp_path / "run.db"
    env = _run_env(database)
    with socket.socket() as other:
        other.bind(("127.0.0.1", free_port()))
        other.listen()
        port = other.getsockname()[1]
        result = subprocess.run(
            _make_run(port), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode != 0
    assert result.stdout == "", result.stdout
    errors = [line for line in result.stderr.splitlines() if not line.startswith("make:")]
    assert errors == [
        f"error: cannot listen on http://127.0.0.1:{port}: the port is taken (another "
        "server is running there?); stop it, or choose another port (jobmatch serve --port N, "
        "make run PORT=N)"
    ], result.stderr
    assert not database.exists()
