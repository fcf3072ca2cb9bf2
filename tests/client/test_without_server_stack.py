"""A worker host installs `jobmatch[agent]`: app.client must import and work with the
server's stack (SQLAlchemy, FastAPI, Starlette, Alembic, uvicorn, psycopg, pydantic) absent.
A child interpreter makes those unimportable and then uses the client on a live server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.client.conftest import ADMIN
from tests.live_server import LiveServer

SERVER_STACK = ("sqlalchemy", "fastapi", "starlette", "alembic", "uvicorn", "psycopg", "pydantic")

CHILD = textwrap.dedent(
    """
    import importlib.abc, json, sys

    BLOCKED = set(sys.argv[3].split(","))

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not installed on this worker host")
            return None

    sys.meta_path.insert(0, Absent())
    from app.client import AdminClient, JobSpec, WorkerClient, WorkerSpec

    with AdminClient(sys.argv[1], sys.argv[2]) as admin:
        worker = admin.register_worker(WorkerSpec(name="agent-host", slots=1))
        job = admin.submit_job(JobSpec(command=["true"]))
    with WorkerClient(sys.argv[1], worker.token, "agent-host") as client:
        pulled = client.pull()
        done = client.finish_job(pulled.id, "finished", exit_code=0)
    loaded = sorted({name.split(".")[0] for name in sys.modules} & BLOCKED)
    print(json.dumps({"job": job.id, "pulled": pulled.id, "state": done.state, "loaded": loaded}))
    """
)


def test_the_client_works_without_the_server_stack(server: LiveServer) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, server.base_url, ADMIN, ",".join(SERVER_STACK)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pulled"] == report["job"] and report["state"] == "finished"
    assert report["loaded"] == []


def test_the_blocker_really_blocks() -> None:
    """The finder above is what makes the first test mean something: importing the server's
    app through it fails."""
    child = CHILD.replace("from app.client import", "import app.api.app\nfrom app.client import")
    result = subprocess.run(
        [sys.executable, "-c", child, "http://127.0.0.1:9", ADMIN, ",".join(SERVER_STACK)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "is not installed on this worker host" in result.stderr
