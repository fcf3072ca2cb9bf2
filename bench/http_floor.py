"""What this machine's HTTP stack can do at best: the ceiling of issue 4's HTTP figure.

Run from the repository root::

    .venv/bin/python bench/http_floor.py [--seconds 10] [--processes 2] [--clients 8]

``bench/dispatch.py`` drives ``jobmatch serve`` with 8 client threads that pull and finish
jobs: two requests per job. This script drives the same client loop (the same
``http.client`` threads, two POSTs per "job") against servers that do less and less
of the real work, on the same uvicorn (httptools, uvloop) with the same number of
worker processes, so that the jobs/s figure of the real server can be read against what
the stack itself allows on this machine:

* ``asgi``: a bare ASGI callable answering ``{}`` (no framework at all);
* ``fastapi``: a FastAPI app whose two endpoints answer ``{}`` (routing, dependency
  solving, the response model), no database;
* ``fastapi+db``: the same endpoints, each running one PostgreSQL transaction through
  jobmatch's own ``Database`` (pooled session, BEGIN, one primary-key UPDATE, COMMIT):
  the least a pull or a finish could do.

For each it prints jobs/s (request pairs per second) and the CPU seconds per job spent by
the server processes, PostgreSQL and the client threads. Not a test; never gates CI.
"""

from __future__ import annotations

import argparse
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_SERVER = os.environ.get(
    "JOBMATCH_BENCH_POSTGRES_URL",
    os.environ.get(
        "JOBMATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
)
TABLE = "bench_http_floor"


class Done(BaseModel):
    """The finish body."""

    outcome: str


class Out(BaseModel):
    """The answer, a small job-like object."""

    id: int
    state: str


# ---------------------------------------------------------------------------- the servers
# uvicorn imports these by name (``bench.http_floor:asgi_app`` and so on) in each worker
# process; the mode's database URL comes from the environment.


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI answer: what uvicorn itself costs per request."""
    if scope["type"] != "http":
        return
    while True:
        message = await receive()
        if not message.get("more_body"):
            break
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")],
        }
    )
    await send({"type": "http.response.body", "body": b"{}"})


def fastapi_app() -> Any:
    """Two FastAPI endpoints shaped like pull and finish, with no database."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/workers/{name}/pull")
    def pull(name: str) -> Out:
        return Out(id=1, state="running")

    @app.post("/v1/jobs/{job_id}/finish")
    def finish(job_id: int, body: Done) -> Out:
        return Out(id=job_id, state=body.outcome)

    return app


def fastapi_db_app() -> Any:
    """The same endpoints, each one transaction through jobmatch's ``Database``: BEGIN,
    one UPDATE by primary key, COMMIT (a WAL flush, as every real pull and finish pays)."""
    from fastapi import Depends, FastAPI
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.engine import Database

    database = Database(os.environ["JOBMATCH_FLOOR_URL"])
    touch = text(f"UPDATE {TABLE} SET n = n + 1 WHERE id = :id RETURNING n")

    def session() -> Iterator[Session]:
        with database.transaction() as opened:
            yield opened

    app = FastAPI()

    @app.post("/v1/workers/{name}/pull")
    def pull(name: str, db: Session = Depends(session, scope="function")) -> Out:
        row = db.execute(touch, {"id": sum(map(ord, name)) % 64}).scalar_one()
        return Out(id=row, state="running")

    @app.post("/v1/jobs/{job_id}/finish")
    def finish(job_id: int, body: Done, db: Session = Depends(session, scope="function")) -> Out:
        db.execute(touch, {"id": job_id % 64}).scalar_one()
        return Out(id=job_id, state=body.outcome)

    return app


MODES = {
    "asgi": ("bench.http_floor:asgi_app", False),
    "fastapi": ("bench.http_floor:fastapi_app", True),
    "fastapi+db": ("bench.http_floor:fastapi_db_app", True),
}


# ---------------------------------------------------------------------------- the harness


@contextmanager
def serve(target: str, factory: bool, processes: int, url: str) -> Iterator[tuple[int, int]]:
    from bench.dispatch import _free_port

    port = _free_port()
    env = dict(os.environ, JOBMATCH_FLOOR_URL=url, PYTHONPATH=str(ROOT))
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        target,
        *(["--factory"] if factory else []),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(processes),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not listen within 60 s") from None
                time.sleep(0.2)
        time.sleep(1.5)  # every worker process up before the clock starts
        yield port, process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def client(port: int, number: int, stop_at: float, counts: list[int]) -> None:
    """bench/dispatch.py's client loop: POST pull, then POST finish with a JSON body."""
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}
    body = json.dumps({"outcome": "finished"})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    done = 0
    try:
        while time.perf_counter() < stop_at:
            connection.request("POST", f"/v1/workers/w{number:05d}/pull", headers=headers)
            response = connection.getresponse()
            response.read()
            connection.request("POST", f"/v1/jobs/{number}/finish", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"finish answered {response.status}")
            done += 1
    finally:
        connection.close()
        counts[number] = done


def run(mode: str, seconds: float, processes: int, clients: int, url: str) -> str:
    from sqlalchemy.engine import make_url

    from bench.dispatch import process_cpu

    target, factory = MODES[mode]
    database = make_url(url).database or "postgres"
    with serve(target, factory, processes, url) as (port, pgid):
        counts = [0] * clients

        def sample() -> tuple[float, float, float]:
            return (
                process_cpu(lambda _cmd, fields: fields[2] == str(pgid)),
                # The backends of this script's database only (other databases on the
                # server may be busy with other work).
                process_cpu(
                    lambda cmd, _f: cmd.startswith("postgres: ") and f" {database} " in cmd
                ),
                time.process_time(),
            )

        before = sample()
        started = time.perf_counter()
        stop_at = started + seconds
        threads = [
            threading.Thread(target=client, args=(port, n, stop_at, counts)) for n in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        after = sample()
    jobs = sum(counts)
    server, postgres, own = (b - a for a, b in zip(before, after, strict=True))
    per = 1000 / max(jobs, 1)
    return (
        f"  {mode:<11} {jobs / elapsed:7.0f} jobs/s   CPU per job: server {server * per:5.2f} ms,"
        f" PostgreSQL {postgres * per:5.2f} ms, clients {own * per:5.2f} ms"
    )


@contextmanager
def scratch_database() -> Iterator[str]:
    """A database of its own holding the one table the ``fastapi+db`` endpoints update;
    dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"jobmatch_floor_{os.getpid()}"
    admin = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
    url = make_url(POSTGRES_SERVER).set(database=name).render_as_string(hide_password=False)
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        engine = create_engine(url)
        with engine.begin() as connection:
            connection.execute(text(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, n INTEGER)"))
            connection.execute(
                text(f"INSERT INTO {TABLE} SELECT g, 0 FROM generate_series(0, 63) AS g")
            )
        engine.dispose()
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(
        f"HTTP floor: {args.clients} client threads, {args.processes} server processes,"
        f" {args.seconds:.0f} s per mode; {os.cpu_count()} CPUs;"
        f" load {os.getloadavg()[0]:.1f}"
    )
    with scratch_database() as url:
        for mode in MODES if args.mode == "all" else [args.mode]:
            print(run(mode, args.seconds, args.processes, args.clients, url))


if __name__ == "__main__":
    main()
