"""Issue 22: a worker host runs `jobmatch-agent` without the server's stack. A child
interpreter makes SQLAlchemy, FastAPI, Starlette, uvicorn, Alembic, psycopg, pydantic and
typer unimportable, then imports app.agent.main: for --help, and for a real job on a live
server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app.db.engine import Database
from tests.live_server import LiveServer
from tests.support.agent_probes import call, wait_for

SERVER_STACK = (
    "sqlalchemy",
    "fastapi",
    "starlette",
    "uvicorn",
    "alembic",
    "psycopg",
    "pydantic",
    "pydantic_settings",
    "typer",
)

CHILD = textwrap.dedent(
    """
    import importlib.abc, sys

    BLOCKED = set(sys.argv[1].split(","))

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not installed on this worker host")
            return None

    sys.meta_path.insert(0, Absent())
    from app.agent.main import main

    code = main(sys.argv[2:]) if sys.argv[2:] != ["--help"] else None
    if code is None:
        try:
            main(["--help"])
        except SystemExit as exit:
            code = exit.code
    loaded = sorted({name.split(".")[0] for name in sys.modules} & BLOCKED)
    print("loaded:", ",".join(loaded) or "nothing", file=sys.stderr)
    sys.exit(code)
    """
)


def _child(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(SERVER_STACK), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_the_agent_imports_and_helps_without_the_server_stack() -> None:
    result = _child("--help")
    assert result.returncode == 0, result.stderr
    assert "usage: jobmatch-agent" in result.stdout and "--slots" in result.stdout
    assert "loaded: nothing" in result.stderr


def test_the_blocker_really_blocks() -> None:
    """Without this, the test above would prove nothing: the server's app cannot be
    imported through the blocker."""
    child = CHILD.replace("from app.agent.main import main", "import app.api.app")
    result = subprocess.run(
        [sys.executable, "-c", child, ",".join(SERVER_STACK), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "is not installed on this worker host" in result.stderr


def test_the_agent_runs_a_job_without_the_server_stack(
    database_url: str, database: Database, tmp_path: Path
) -> None:
    server = LiveServer(database_url, tmp_path / "server.log")
    server.start()
    try:
        token = call(server, "POST", "/v1/workers", {"name": "bare", "slots": 1})["token"]
        job = call(server, "POST", "/v1/jobs", {"command": [sys.executable, "-c", "print(42)"]})
        env = {**os.environ, "JOBMATCH_WORKER_TOKEN": token}
        args = ["--server", server.base_url, "--name", "bare", "--max-jobs", "1"]
        args += ["--spool", str(tmp_path / "spool"), "--poll-interval", "0.2"]
        result = _child(*args, env=env)
        assert result.returncode == 0, result.stderr
        assert "loaded: nothing" in result.stderr
        # Issue 25: the agent logs JSON like the server, one object per line (the last
        # line is the blocker's own report above).
        logged = result.stderr.splitlines()[:-1]
        assert logged, result.stderr
        for line in logged:
            record = json.loads(line)
            assert {"time", "level", "logger", "message"} <= record.keys(), line
        assert any(json.loads(line)["logger"] == "jobmatch.agent" for line in logged)
        done = wait_for(lambda: (j := call(server, "GET", f"/v1/jobs/{job['id']}"))["output"] and j)
        assert (done["state"], done["output"].strip()) == ("finished", "42")
    finally:
        server.stop()
