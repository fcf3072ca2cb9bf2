"""What this machine's HTTP stack can do at best: the ceiling of issue 4's HTTP figure.

Run from the repository root::

    .venv/bin/python bench/http_floor.py [--seconds 10] [--processes 2] [--clients 8]
    .venv/bin/python bench/http_floor.py --database sqlite

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
  the least a pull or a finish could do (the floor: its definition does not move with
  jobmatch's code, so that ratios of different runs and commits compare);
* ``jobmatch``: ``jobmatch serve`` itself, the same client threads each pulling as one
  registered worker (its own token) and finishing the job it got, from a waiting list
  large enough for the whole run.

For each it prints jobs/s (request pairs per second) and the CPU seconds per job spent by
the server processes, PostgreSQL and the client threads, with the load average when the
mode started (a busy neighbour lowers every figure), and at the end the line
``ratio jobmatch/floor R``: jobmatch's jobs/s over the floor's, both of this run.

The floor and jobmatch run ``--rounds`` times, alternately and back to back, and R is the
median of the rounds' ratios. On a shared machine the load moves within a minute (two
jobmatch runs of one commit, two minutes apart: 288 and 242 jobs/s); one floor run before
one jobmatch run put that drift into the ratio, and a median of adjacent pairs keeps most
of it out. Every round's figures
and ratio are printed, so the spread is there to see. The
PostgreSQL run also counts the round trips a pull and a finish send, at the connection
(a proxy between the server and PostgreSQL that counts the protocol's Query and Sync
messages), over a short sequential run after the timed one.

``--database sqlite`` runs the database modes on a scratch SQLite file instead. Not a
test; never gates CI.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_SERVER = os.environ.get(
    "JOBMATCH_BENCH_POSTGRES_URL",
    os.environ.get(
        "JOBMATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
)
TABLE = "bench_http_floor"
#: The mode that runs jobmatch itself.
JOBMATCH = "jobmatch"


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
    # jobmatch's own server entry point, as `jobmatch serve` runs it.
    JOBMATCH: ("app.api.app:create_app_from_environment", True),
}
#: The mode every ratio is taken to.
FLOOR = "fastapi+db"


# ---------------------------------------------------------------------------- the harness


@contextmanager
def serve(
    target: str, factory: bool, processes: int, env: dict[str, str]
) -> Iterator[tuple[int, int]]:
    from bench.dispatch import _free_port

    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
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
    if target == MODES[JOBMATCH][0]:
        # What `jobmatch serve` adds to uvicorn's defaults (app/cli/local.py).
        command += ["--http", "app.api.http_protocol:LimitedHttpProtocol"]
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


@dataclass
class Tally:
    """What one client thread did."""

    jobs: int = 0
    empty: int = 0
    error: str = ""


def client(port: int, number: int, stop_at: float, tally: Tally) -> None:
    """bench/dispatch.py's client loop: POST pull, then POST finish with a JSON body."""
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}
    body = json.dumps({"outcome": "finished"})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
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
            tally.jobs += 1
    finally:
        connection.close()


def jobmatch_client(
    port: int, worker: str, token: str, stop_at: float, tally: Tally, limit: int | None = None
) -> None:
    """The same loop against jobmatch: the worker pulls with its own token and finishes
    the job the pull gave it. A 204 (nothing for it now) counts as no job."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"outcome": "finished"})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        while time.perf_counter() < stop_at and (limit is None or tally.jobs < limit):
            connection.request("POST", f"/v1/workers/{worker}/pull", headers=headers)
            response = connection.getresponse()
            payload = response.read()
            if response.status == 204:
                tally.empty += 1
                continue
            if response.status != 200:
                raise RuntimeError(f"pull answered {response.status}: {payload[:200]!r}")
            job_id = json.loads(payload)["id"]
            connection.request("POST", f"/v1/jobs/{job_id}/finish", body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200:
                raise RuntimeError(f"finish answered {response.status}: {payload[:200]!r}")
            tally.jobs += 1
    except Exception as error:  # reported with the figures, not hidden
        tally.error = repr(error)
    finally:
        connection.close()


@dataclass(frozen=True)
class Outcome:
    mode: str
    rate: float
    line: str


def run(mode: str, args: argparse.Namespace, url: str, workers: list[tuple[str, str]]) -> Outcome:
    from sqlalchemy.engine import make_url

    from bench.dispatch import process_cpu

    target, factory = MODES[mode]
    database = make_url(url).database or "postgres"
    env = {"JOBMATCH_FLOOR_URL": url}
    if mode == JOBMATCH:
        env.update(JOBMATCH_ENVIRONMENT, JOBMATCH_DATABASE_URL=url)
    load = os.getloadavg()[0]
    with serve(target, factory, args.processes, env) as (port, pgid):
        tallies = [Tally() for _ in range(args.clients)]

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
        stop_at = started + args.seconds
        threads = [
            threading.Thread(target=jobmatch_client, args=(port, *workers[n], stop_at, tallies[n]))
            if mode == JOBMATCH
            else threading.Thread(target=client, args=(port, n, stop_at, tallies[n]))
            for n in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        after = sample()
    jobs = sum(tally.jobs for tally in tallies)
    server, postgres, own = (b - a for a, b in zip(before, after, strict=True))
    per = 1000 / max(jobs, 1)
    line = (
        f"  {mode:<11} {jobs / elapsed:7.0f} jobs/s   CPU per job: server {server * per:5.2f} ms,"
        f" PostgreSQL {postgres * per:5.2f} ms, clients {own * per:5.2f} ms   load {load:.1f}"
    )
    empty = sum(tally.empty for tally in tallies)
    if empty:
        line += f"\n  {'':<11} ({empty} pulls found no job)"
    for tally in tallies:
        if tally.error:
            line += f"\n  {'':<11} a client stopped: {tally.error}"
            break
    return Outcome(mode, jobs / elapsed, line)


# ---------------------------------------------------------------------------- jobmatch's data

#: The settings of the jobmatch server under test: quiet, and no admin token is needed.
JOBMATCH_ENVIRONMENT = {
    "JOBMATCH_LOG_LEVEL": "WARNING",
    "JOBMATCH_LOG_FORMAT": "text",
}
#: What every worker offers and every job asks for (Momotor tags): one category, so that
#: every pull finds work at once and the figure is the HTTP path's, not the search's
#: (bench/dispatch.py measures pulls among many categories).
WORKER_TAGS = "language: python"
JOB_TAGS = "language: python"


def jobmatch_data(url: str, clients: int, jobs: int) -> list[tuple[str, str]]:
    """Migrate the scratch database, register one worker (one slot) per client thread,
    issue their tokens, and leave ``jobs`` waiting jobs: the first through ``submit_job``,
    the others copies of its row (the same category). Returns (worker, token) pairs."""
    from sqlalchemy import Table, insert

    from app.db import migrate, tokens
    from app.db.engine import Database
    from app.db.models import Job, JobState, Role
    from app.matching.submission import JobSpec, submit_job
    from app.matching.workers import WorkerSpec, upsert_worker
    from bench.dispatch import analyze

    migrate.upgrade(url)
    database = Database(url)
    issued: list[tuple[str, str]] = []
    try:
        with database.transaction() as session:
            for number in range(clients):
                name = f"w{number:05d}"
                upsert_worker(session, WorkerSpec(name=name, resources=WORKER_TAGS, slots=1))
                _row, token = tokens.issue_token(session, role=Role.WORKER, subject=name)
                issued.append((name, token))
            first = submit_job(session, JobSpec(resources=JOB_TAGS), submitter="bench")
            category_id, submitted_at = first.category_id, first.submitted_at
        rows = [
            {
                "state": JobState.WAITING,
                "priority": 0,
                "slots": 1,
                "category_id": category_id,
                "resources": JOB_TAGS,
                "submitter": "bench",
                "submitted_at": submitted_at,
            }
            for _ in range(jobs - 1)
        ]
        with database.engine.begin() as connection:
            connection.execute(insert(cast(Table, Job.__table__)), rows)
        # Fresh planner statistics after the bulk load, as autovacuum would give.
        analyze(database)
    finally:
        database.dispose()
    return issued


# ---------------------------------------------------------------------------- round trips


class RoundTripCounter:
    """A TCP proxy between jobmatch and PostgreSQL that counts the round trips the
    server's connections start: every simple Query ('Q') and every Sync ('S') of the
    extended protocol is one exchange the client waits for (BEGIN, COMMIT, a pre-ping and
    each statement alike). Only the frontend's messages are parsed; everything is
    forwarded as it is. The URL it gives out turns TLS and GSS encryption off, so that
    the stream it parses is plain."""

    def __init__(self, url: str) -> None:
        from sqlalchemy.engine import make_url

        target = make_url(url)
        self._upstream = (target.host or "127.0.0.1", target.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = (
            target.set(host="127.0.0.1", port=self._listener.getsockname()[1])
            .update_query_dict({"sslmode": "disable", "gssencmode": "disable"})
            .render_as_string(hide_password=False)
        )
        self.round_trips = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            threading.Thread(
                target=self._frontend, args=(downstream, upstream), daemon=True
            ).start()
            threading.Thread(target=self._pipe, args=(upstream, downstream), daemon=True).start()

    def _frontend(self, source: socket.socket, sink: socket.socket) -> None:
        buffer = b""
        started = False  # the startup message has no type byte
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
                buffer += chunk
                while True:
                    if not started:
                        if len(buffer) < 4:
                            break
                        size = int.from_bytes(buffer[:4], "big")
                        if len(buffer) < size:
                            break
                        buffer, started = buffer[size:], True
                        continue
                    if len(buffer) < 5:
                        break
                    size = int.from_bytes(buffer[1:5], "big")
                    if len(buffer) < size + 1:
                        break
                    if buffer[:1] in (b"Q", b"S"):
                        with self._lock:
                            self.round_trips += 1
                    buffer = buffer[size + 1 :]
        except OSError:
            pass
        finally:
            _close(source, sink)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source, sink)

    def close(self) -> None:
        self._listener.close()


def _close(*sockets: socket.socket) -> None:
    for each in sockets:
        with suppress(OSError):
            each.shutdown(socket.SHUT_RDWR)
        each.close()


def round_trips(url: str, workers: list[tuple[str, str]], jobs: int) -> str:
    """Round trips per pull and per finish of one client thread in sequence against one
    server process, counted at the connection: ``jobs`` pull+finish pairs, and as many
    pulls of a worker whose slot is taken (answered 204) apart, to tell the two apart."""
    counter = RoundTripCounter(url)
    env = dict(JOBMATCH_ENVIRONMENT, JOBMATCH_DATABASE_URL=counter.url)
    try:
        with serve(*MODES[JOBMATCH], 1, env) as (port, _pgid):
            worker, token = workers[0]
            headers = {"Authorization": f"Bearer {token}"}
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            # Warm up (the pool's connections, prepared statements) before counting.
            jobmatch_client(port, worker, token, time.perf_counter() + 60, Tally(), 20)
            before = counter.round_trips
            tally = Tally()
            jobmatch_client(port, worker, token, time.perf_counter() + 60, tally, jobs)
            pairs = counter.round_trips - before
            # A pull that finds the worker busy: hold one job, then pull again and again.
            connection.request("POST", f"/v1/workers/{worker}/pull", headers=headers)
            connection.getresponse().read()
            before = counter.round_trips
            for _ in range(jobs):
                connection.request("POST", f"/v1/workers/{worker}/pull", headers=headers)
                connection.getresponse().read()
            empty = counter.round_trips - before
            connection.close()
    finally:
        counter.close()
    if tally.error or not tally.jobs:
        return f"  round trips: not counted ({tally.error or 'no job pulled'})"
    return (
        f"  round trips at the connection: {pairs / tally.jobs:.1f} per pull+finish,"
        f" {empty / jobs:.1f} per pull that finds no room ({tally.jobs} jobs, one client)"
    )


# ---------------------------------------------------------------------------- databases


@contextmanager
def scratch_database(backend: str) -> Iterator[str]:
    """A database of its own holding the one table the ``fastapi+db`` endpoints update
    (and jobmatch's schema when that mode runs); dropped afterwards, also on failure."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"jobmatch_floor_{os.getpid()}"
    if backend == "sqlite":
        path = Path(f"/tmp/{name}.db")
        url = f"sqlite:///{path}"
        try:
            engine = create_engine(url)
            with engine.begin() as connection:
                connection.execute(text("PRAGMA journal_mode=WAL"))
                _fill_floor_table(
                    connection,
                    "WITH RECURSIVE g(v) AS"
                    " (SELECT 0 UNION ALL SELECT v + 1 FROM g WHERE v < 63)"
                    " SELECT v, 0 FROM g",
                )
            engine.dispose()
            yield url
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    admin = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
    url = make_url(POSTGRES_SERVER).set(database=name).render_as_string(hide_password=False)
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        engine = create_engine(url)
        with engine.begin() as connection:
            _fill_floor_table(connection, "SELECT g, 0 FROM generate_series(0, 63) AS g")
        engine.dispose()
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _fill_floor_table(connection: Any, rows: str) -> None:
    from sqlalchemy import text

    connection.execute(text(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, n INTEGER)"))
    connection.execute(text(f"INSERT INTO {TABLE} {rows}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per mode")
    parser.add_argument("--processes", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    parser.add_argument(
        "--rounds",
        type=_positive,
        default=3,
        help="how many times the floor and jobmatch run, alternately; the ratio is the"
        " median of the rounds' ratios",
    )
    parser.add_argument(
        "--database",
        choices=["postgresql", "sqlite"],
        default="postgresql",
        help="where the database modes run (PostgreSQL: a scratch database on"
        " $JOBMATCH_BENCH_POSTGRES_URL's server; SQLite: a scratch file under /tmp)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=40_000,
        help="waiting jobs when the jobmatch mode starts (more than it can finish)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    # A SIGTERM (a timeout, a stopped job) ends the run through its ``finally`` blocks:
    # the servers stop and the scratch database is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(
        f"HTTP floor: {args.clients} client threads, {args.processes} server processes,"
        f" {args.seconds:g} s per mode, {args.rounds} rounds of the floor and jobmatch,"
        f" {args.database}; {os.cpu_count()} CPUs;"
        f" load {os.getloadavg()[0]:.1f}"
    )
    modes = list(MODES) if args.mode == "all" else [args.mode]
    ratios: list[float] = []
    with scratch_database(args.database) as url:
        workers = jobmatch_data(url, args.clients, args.jobs) if JOBMATCH in modes else []
        for round_modes in schedule(modes, args.rounds):
            rates: dict[str, float] = {}
            for mode in round_modes:
                outcome = run(mode, args, url, workers)
                print(outcome.line, flush=True)
                rates[mode] = outcome.rate
            if JOBMATCH in rates and FLOOR in rates:
                ratios.append(rates[JOBMATCH] / max(rates[FLOOR], 1e-9))
                if args.rounds > 1:
                    print(f"  {'':<11} round {len(ratios)}: jobmatch/floor {ratios[-1]:.2f}")
        if JOBMATCH in modes and args.database == "postgresql":
            print(round_trips(url, workers, 50))
    if ratios:
        print(f"ratio jobmatch/floor {statistics.median(ratios):.2f}")


def schedule(modes: list[str], rounds: int) -> list[list[str]]:
    """The modes of each round: the first round runs every mode asked for, in order; the
    rounds after it run only the floor and jobmatch again (when both were asked for), so
    that each ratio is taken between two runs a few seconds apart."""
    repeated = [mode for mode in modes if mode in (FLOOR, JOBMATCH)]
    if len(repeated) < 2:
        return [modes]
    return [modes] + [repeated] * (rounds - 1)


def _positive(text: str) -> int:
    """A whole number of 1 or more, for ``--rounds``."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text}")
    return number


if __name__ == "__main__":
    main()
