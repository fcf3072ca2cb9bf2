"""Dispatch speed: pulls, ranked candidates, scaling with waiting jobs, HTTP throughput.

Run from the repository root::

    .venv/bin/python bench/dispatch.py                     # both databases, full size
    .venv/bin/python bench/dispatch.py --database postgresql
    .venv/bin/python bench/dispatch.py --quick             # small sizes, about a minute
    .venv/bin/python bench/dispatch.py --fair-share        # fair share on against off
    .venv/bin/python bench/dispatch.py --fair-share --groups 10   # and group share

It builds a scratch database per backend (SQLite under /tmp, PostgreSQL ``jobmatch_bench_*``
on 127.0.0.1:5432 as user postgres; both removed at the end unless ``--keep``), fills it
(bench/_data.py), and measures, on the same data:

* pull latency through ``dispatch.pull`` in its own transaction, committed, the job then
  finished in a second transaction (so the waiting count stays about the same);
* the ranked candidates of one job (``candidates.job_candidates``), one job per category;
* pulls (rolled back, so every one sees the same state) with the small and the large
  number of waiting jobs, for ordinary workers and for a worker that fits one category;
* a naive baseline on the same data: walk the waiting jobs oldest first in Python and ask
  Momotor's ``match`` (plus slots) of each until one fits, as debusine did; cut at a
  deadline;
* over HTTP, ``jobmatch serve`` on a loopback port and 8 client threads pulling and
  finishing jobs with their worker tokens for a fixed time, with the CPU each side used.

How to read the figures:

* The pull target is judged on the whole committed transaction, BEGIN (a pooled connection
  and its pre-ping) to COMMIT, as a worker feels it; its parts (until ``dispatch.pull``
  returned, the COMMIT alone) are shown beneath. On PostgreSQL the COMMIT is a WAL flush
  to disk (see the "one-row INSERT + COMMIT" calibration line).
* Latencies are measured in rounds and every round counts: p50 and p99 are over all
  rounds pooled, with each round's p50 beside them and the load average (this machine is
  shared; a busy neighbour shows as a round that stands out). The CPU lines (CPU seconds
  per pull) are the least sensitive to load.
* Round trips per pull and per finish are counted at the connection in a separate pass of
  committed pulls (bench/_measure.py: libpq's protocol trace on PostgreSQL, so the pool's
  pre-ping, BEGIN and COMMIT count; SQLite's statement trace on SQLite).
* Workers: the first of each machine profile goes through ``upsert_worker``; the others
  are copies of its rows (see bench/_data.py; ``--register-all`` registers every one).
  Categories always go through ``submit_job``; further jobs are plain INSERTs.
* ``--explain`` prints the plans of the pull's main query, of the candidates query and of
  a new category's misfit CASE; ``--profile`` runs cProfile over pulls.

Random seeds are fixed. Not a test: pytest never collects it (the file name does not
start with ``test_``), and it never gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import http.client
import json
import os
import pstats
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import uvloop  # noqa: E402
from _data import (  # noqa: E402
    NOTHING_WORKER,
    PICKY_WORKER,
    Dataset,
    build_categories,
    build_workers,
    category_definition,
    grow_jobs,
    verify_clones,
)
from _measure import RoundTrips, load_average, scratch_database  # noqa: E402
from _measure import processes_cpu as process_cpu  # noqa: E402
from sqlalchemy import (  # noqa: E402
    BindParameter,
    String,
    bindparam,
    cast,
    event,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402
from sqlalchemy.sql import Select, visitors  # noqa: E402

from app.db import migrate, tokens  # noqa: E402
from app.db.base import utcnow  # noqa: E402
from app.db.engine import Database  # noqa: E402
from app.db.event_loop import EventLoopConnections  # noqa: E402
from app.db.models import (  # noqa: E402
    Category,
    CategoryFit,
    CategoryMisfit,
    Job,
    JobState,
    Role,
    WorkerTag,
)
from app.db.models import Worker as WorkerRow  # noqa: E402
from app.matching import candidates  # noqa: E402
from app.matching.dispatch import express  # noqa: E402
from app.matching.dispatch import pull as dispatch  # noqa: E402
from app.matching.ordering import policy as ordering_policy  # noqa: E402
from app.matching.ordering import shares as fair_shares  # noqa: E402
from app.matching.ordering import usage as fair_share_usage  # noqa: E402
from app.matching.reasons import SCOPE_PARAM  # noqa: E402
from app.matching.submission import JobSpec, submit_job  # noqa: E402
from app.notations.momotor.resources import Resources  # noqa: E402
from app.notations.momotor.strengths import NoMatch  # noqa: E402

SEED = 20261121
POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"

# The issue's targets.
PULL_P50_MS = 3.0
PULL_P99_MS = 10.0
CANDIDATES_P50_MS = 30.0
SCALE_RATIO = 1.5
HTTP_JOBS_PER_S = 500.0


@dataclass(frozen=True)
class Sizes:
    workers: int
    jobs: int
    categories: int
    small: int  # waiting jobs for the small side of the scaling comparison
    large: int  # and for the large side
    pulls: int  # committed pulls for the main latency figure
    scale_pulls: int  # rolled-back pulls on each side of the scaling comparison
    picky_pulls: int
    candidate_jobs: int
    naive_pulls: int
    naive_deadline: float
    http_seconds: float
    http_clients: int = 8
    rounds: int = 3
    new_categories: int = 6


FULL = Sizes(
    workers=10_000,
    jobs=100_000,
    categories=500,
    small=10_000,
    large=1_000_000,
    pulls=500,
    scale_pulls=300,
    picky_pulls=100,
    candidate_jobs=100,
    naive_pulls=40,
    naive_deadline=2.0,
    http_seconds=10.0,
)
QUICK = Sizes(
    workers=1_000,
    jobs=10_000,
    categories=100,
    small=1_000,
    large=50_000,
    pulls=200,
    scale_pulls=100,
    picky_pulls=40,
    candidate_jobs=30,
    naive_pulls=10,
    naive_deadline=0.5,
    http_seconds=3.0,
)


# ---------------------------------------------------------------------------- figures


@dataclass
class Figure:
    label: str
    p50: float | None = None
    p99: float | None = None
    unit: str = "ms"
    note: str = ""
    target: str = ""
    met: bool | None = None


@dataclass
class Report:
    database: str
    sizes: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        print(f"  {_figure_line(figure)}", flush=True)
        return figure


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1)."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))
    return ordered[index]


def _ms(seconds: list[float]) -> tuple[float, float]:
    values = [s * 1000 for s in seconds]
    return percentile(values, 0.50), percentile(values, 0.99)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.2f} ms" if value < 100 else f"{value:,.0f} ms"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.0f} {unit}".rstrip()


def _figure_line(figure: Figure) -> str:
    verdict = {None: "", True: "MET", False: "MISSED"}[figure.met]
    return (
        f"{figure.label:<52} {_fmt(figure.p50, figure.unit):>11} "
        f"{_fmt(figure.p99, figure.unit):>11}  {figure.target:<14} {verdict:<7} {figure.note}"
    )


# ---------------------------------------------------------------------------- databases


def analyze(database: Database) -> None:
    """Fresh planner statistics after a bulk load, as autovacuum/ANALYZE would give."""
    if database.dialect_name == "postgresql":
        with database.engine.connect().execution_options(
            isolation_level="AUTOCOMMIT"
        ) as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
    else:
        with database.engine.begin() as connection:
            connection.exec_driver_sql("ANALYZE")


def set_jit(database: Database, enabled: bool | None) -> None:
    """PostgreSQL only: JIT off (False) or back to the server's default (None) for every
    new connection to the scratch database; pooled connections are dropped."""
    if database.dialect_name != "postgresql":
        return
    name = make_url(database.url).database
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        if enabled is None:
            c.exec_driver_sql(f'ALTER DATABASE "{name}" RESET jit')
        else:
            c.exec_driver_sql(f'ALTER DATABASE "{name}" SET jit = {"on" if enabled else "off"}')
    database.engine.dispose()


def new_category_submits(
    database: Database, seed: int, count: int, *, jit: bool | None = None
) -> list[float]:
    """Seconds of ``submit_job`` for jobs whose request is new (a category is created and
    its misfits computed against every worker); rolled back."""
    rng = random.Random(seed)
    with database.transaction(write=False) as session:
        known = session.scalar(select(func.max(Category.id))) or 0
    times: list[float] = []
    for _ in range(count * 20):
        if len(times) >= count:
            break
        resources, slots = category_definition(rng)
        try:
            with database.transaction() as session:
                if jit is not None:
                    session.execute(text(f"SET LOCAL jit = {'on' if jit else 'off'}"))
                started = time.perf_counter()
                job = submit_job(
                    session, JobSpec(resources=resources, slots=slots), submitter="bench"
                )
                if job.category_id > known:
                    times.append(time.perf_counter() - started)
                raise _Rollback
        except _Rollback:
            pass
    return times


def count_waiting(database: Database) -> int:
    with database.transaction(write=False) as session:
        return int(
            session.scalar(
                select(func.count()).select_from(Job).where(Job.state == JobState.WAITING)
            )
            or 0
        )


# ---------------------------------------------------------------------------- measurements


class _Rollback(Exception):
    """Raised inside a transaction to roll it back after a measurement."""


@dataclass(frozen=True)
class PullTiming:
    #: From BEGIN (a pooled connection, its pre-ping) until ``dispatch.pull`` returns.
    pull: float
    #: The COMMIT (a WAL flush to disk on PostgreSQL) or the ROLLBACK.
    end: float
    #: The committed transaction that finishes the pulled job; 0 when none ran.
    finish: float
    job_id: int | None

    @property
    def committed(self) -> float:
        """What a worker feels: the pull's whole transaction, its COMMIT included."""
        return self.pull + self.end


def timed_pull(database: Database, worker: str, *, commit: bool) -> PullTiming:
    """One pull in its own transaction; committed and its job finished, or rolled back."""
    job_id: int | None = None
    started = time.perf_counter()
    pulled = started
    try:
        with database.transaction() as session:
            job = dispatch.pull(session, worker)
            job_id = job.id if job is not None else None
            pulled = time.perf_counter()
            if not commit:
                raise _Rollback
    except _Rollback:
        pass
    ended = time.perf_counter()
    finish = 0.0
    if commit and job_id is not None:
        with database.transaction() as session:
            dispatch.finish(session, job_id, worker, "finished")
        finish = time.perf_counter() - ended
    return PullTiming(pulled - started, ended - pulled, finish, job_id)


@dataclass(frozen=True)
class RoundTripCounts:
    pulls: list[int]
    finishes: list[int]
    empty: int
    #: The same, the express way (PostgreSQL): pulls that took a job and their finishes.
    express_pulls: list[int]
    express_finishes: list[int]


def count_round_trips(database: Database, workers: list[str]) -> RoundTripCounts:
    """Round trips of committed pulls and of the finishes of their jobs, counted at the
    connection (bench/_measure.py: the pool's pre-ping, BEGIN and COMMIT included). A
    separate pass: tracing costs time, so no timed pull is traced."""
    counter = RoundTrips(database.engine)
    pulls: list[int] = []
    finishes: list[int] = []
    express_pulls: list[int] = []
    express_finishes: list[int] = []
    empty = 0
    try:
        for worker in workers:
            before = counter.count()
            with database.transaction() as session:
                job = dispatch.pull(session, worker)
                job_id = job.id if job is not None else None
            pulled = counter.count()
            pulls.append(pulled - before)
            if job_id is None:
                empty += 1
                continue
            with database.transaction() as session:
                dispatch.finish(session, job_id, worker, "finished")
            finishes.append(counter.count() - pulled)
            if database.dialect_name == "postgresql":
                count_express(database, counter, worker, express_pulls, express_finishes)
    finally:
        counter.close()
    return RoundTripCounts(pulls, finishes, empty, express_pulls, express_finishes)


def count_express(
    database: Database,
    counter: RoundTrips,
    worker: str,
    pulls: list[int],
    finishes: list[int],
) -> None:
    """Round trips of one committed express pull that takes a job and of its express
    finish (as the HTTP path runs them); a pull the express way hands over is not
    counted."""
    before = counter.count()
    with database.core_transaction() as connection:
        pulled = express.pull(connection, worker, utcnow())
    if pulled is None or pulled.job is None:
        return
    pulls.append(counter.count() - before)
    report = SimpleNamespace(outcome="finished", reason=None, exit_code=0, output=None)
    before = counter.count()
    with database.core_transaction() as connection:
        ended = express.finish(connection, pulled.job.id, worker, report, utcnow())
    if ended is not None:
        finishes.append(counter.count() - before)


def naive_pull(database: Database, worker: str, deadline: float) -> tuple[float, int | None, int]:
    """debusine's way: walk waiting jobs oldest first, ask Momotor about each.

    Returns (seconds, job id or None, jobs examined). Stops at ``deadline`` seconds.
    """
    started = time.perf_counter()
    found: int | None = None
    examined = 0
    with database.transaction(write=False) as session:
        row = session.scalar(select(WorkerRow).where(WorkerRow.name == worker))
        assert row is not None
        offered = Resources.from_string(row.resources)
        free = max((s.free for s in dispatch.free_slots(session, row.id)), default=0)
        result = session.execute(
            select(Job.id, Job.resources, Job.slots)
            .where(Job.state == JobState.WAITING)
            .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
            .execution_options(yield_per=500)
        )
        for job_id, resources, slots in result:
            examined += 1
            if slots <= free:
                try:
                    Resources.from_string(resources).match(offered)
                except NoMatch:
                    pass
                else:
                    found = job_id
                    break
            if examined % 256 == 0 and time.perf_counter() - started > deadline:
                break
        result.close()
    return time.perf_counter() - started, found, examined


def repeat_rolled_back(database: Database, workers: list[str]) -> tuple[list[float], int]:
    """Pull times (rolled back: every pull sees the same state) and how many found nothing."""
    times: list[float] = []
    empty = 0
    for worker in workers:
        timing = timed_pull(database, worker, commit=False)
        times.append(timing.pull)
        empty += timing.job_id is None
    return times, empty


def heads_statement(database: Database, worker: str) -> tuple[str, Any]:
    """The SQL text and parameters of the pull's main statement (the best waiting jobs of
    the categories the worker fits: a SELECT, or on PostgreSQL the one statement that also
    claims and books the job), as the driver received it in a real, rolled-back pull."""
    seen: list[tuple[str, Any]] = []

    def hook(_c: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        seen.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", hook)
    try:
        timed_pull(database, worker, commit=False)
    finally:
        event.remove(database.engine, "before_cursor_execute", hook)
    for statement, parameters in seen:
        flat = " ".join(statement.split())
        if flat.startswith(("SELECT", "WITH")) and "category_misfits" in flat and "jobs" in flat:
            return statement, parameters
    raise RuntimeError(f"no heads query among the {len(seen)} statements of a pull")


def heads_query_alone(database: Database, workers: list[str]) -> list[float]:
    """The pull's main statement sent again through the driver, as it was sent in a pull:
    the "bare SQL pull" part of a pull. Each runs in a savepoint rolled back after it (not
    timed), since on PostgreSQL it claims the job it finds.

    On PostgreSQL the statement runs prepared, as on a warm connection of a server that
    commits its pulls, and the savepoint is rolled back through libpq directly: psycopg
    forgets every prepared statement of the connection when a ROLLBACK (also ROLLBACK TO
    SAVEPOINT) passes through it, and the figure would then time a parse and a plan per
    run that a committed pull does not pay."""
    statements = [heads_statement(database, worker) for worker in workers]
    if database.dialect_name == "postgresql":
        return _prepared_heads_query(database, statements)
    times = []
    with database.engine.connect() as connection:
        for sql, parameters in statements[:10] + statements:
            savepoint = connection.begin_nested()
            started = time.perf_counter()
            connection.exec_driver_sql(sql, parameters).all()
            times.append(time.perf_counter() - started)
            savepoint.rollback()
        connection.rollback()
    return times[10:]


def _prepared_heads_query(database: Database, statements: list[tuple[str, Any]]) -> list[float]:
    times = []
    raw = database.engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        with driver.cursor() as cursor:
            for sql, parameters in statements[:10] + statements:
                cursor.execute("SAVEPOINT bare")
                started = time.perf_counter()
                cursor.execute(sql, parameters, prepare=True)
                cursor.fetchall()
                times.append(time.perf_counter() - started)
                driver.pgconn.exec_(b"ROLLBACK TO SAVEPOINT bare")
        driver.rollback()
    finally:
        raw.close()
    return times[10:]


def timed_express_pull(database: Database, worker: str) -> float:
    """One pull the express way on a Core connection in a thread (app/matching/dispatch/
    express.py: no Session, no ORM objects; the HTTP pull's way behind a pooler),
    committed, its job then finished (not timed); the seconds from BEGIN to COMMIT. A
    pull the express way cannot decide is timed with the general way's transaction that
    then decides it."""
    started = time.perf_counter()
    try:
        with database.core_transaction() as connection:
            pulled = express.pull(connection, worker, utcnow())
    except express.HandOver:
        pulled = None
    job_id = _decided_job(database, worker, pulled)
    elapsed = time.perf_counter() - started
    _finish_untimed(database, worker, job_id)
    return elapsed


def timed_loop_pulls(database: Database, workers: list[str]) -> list[float]:
    """Pulls the way a worker's pull over HTTP takes them on PostgreSQL (the express way
    on the event loop's asyncio connection, app/db/event_loop.py: no thread, no
    SQLAlchemy connection), one after the other in one event loop, each committed and its
    job then finished (not timed); the seconds from BEGIN to COMMIT of each, as
    :func:`timed_express_pull` counts them."""
    pool = EventLoopConnections.for_database(database)
    assert pool is not None

    async def run() -> list[float]:
        pool.bind(asyncio.get_running_loop())
        elapsed: list[float] = []
        try:
            for worker in workers:
                started = time.perf_counter()
                try:
                    async with pool.transaction() as transaction:
                        pulled = await express.pull_on_loop(transaction, worker, utcnow())
                except express.HandOver:
                    pulled = None
                job_id = _decided_job(database, worker, pulled)
                elapsed.append(time.perf_counter() - started)
                _finish_untimed(database, worker, job_id)
        finally:
            await pool.close()
        return elapsed

    # uvloop, as uvicorn runs the server's loop when it is installed (it is, with
    # uvicorn[standard]).
    return uvloop.run(run())


def _decided_job(database: Database, worker: str, pulled: express.Pulled | None) -> int | None:
    """The job an express pull started; where it left the pull to the general way, the
    general way's, in a transaction of its own (timed with the pull, as the server runs
    it)."""
    if pulled is not None:
        return pulled.job.id if pulled.job is not None else None
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        return job.id if job is not None else None


def _finish_untimed(database: Database, worker: str, job_id: int | None) -> None:
    if job_id is not None:
        with database.transaction() as session:
            dispatch.finish(session, job_id, worker, "finished")


def calibration(database: Database) -> tuple[list[float], list[float]]:
    """Round trip of ``SELECT 1`` and a one-row INSERT committed (the disk flush cost)."""
    trips, commits = [], []
    with database.engine.connect() as connection:
        connection.exec_driver_sql("CREATE TABLE IF NOT EXISTS bench_probe (n INTEGER)")
        connection.commit()
        for _ in range(300):
            started = time.perf_counter()
            connection.exec_driver_sql("SELECT 1").all()
            trips.append(time.perf_counter() - started)
        connection.rollback()
        for n in range(200):
            started = time.perf_counter()
            connection.exec_driver_sql(f"INSERT INTO bench_probe VALUES ({n})")
            connection.commit()
            commits.append(time.perf_counter() - started)
        connection.exec_driver_sql("DROP TABLE bench_probe")
        connection.commit()
    return trips, commits


# ---------------------------------------------------------------------------- HTTP


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(url: str, processes: int) -> Iterator[tuple[int, int]]:
    """``jobmatch serve`` on a loopback port; stopped (its process group) afterwards."""
    port = _free_port()
    env = dict(os.environ)
    env.update(
        JOBMATCH_DATABASE_URL=url,
        JOBMATCH_ADMIN_TOKEN=secrets.token_urlsafe(24),
        JOBMATCH_LOG_LEVEL="WARNING",
        JOBMATCH_LOG_FORMAT="text",
        # The server runs the same code as this script, whatever is installed in the venv.
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    script = Path(sys.executable).parent / "jobmatch"
    program = [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]
    command = [
        *program,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(processes),
        "--no-migrate",
    ]
    log = open(f"/tmp/jobmatch_bench_{os.getpid()}_server.log", "w")  # noqa: SIM115
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"jobmatch serve exited with {process.returncode}; see {log.name}"
                )
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                connection.request("GET", "/healthz")
                if connection.getresponse().status == 200:
                    connection.close()
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("jobmatch serve did not answer within 60 s")
            time.sleep(0.2)
        # Every worker process must be up before the clock starts.
        time.sleep(1.0)
        yield port, process.pid  # the server leads its own process group
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()
        # The server logs only warnings and errors: keep the file when it says something.
        if Path(log.name).stat().st_size == 0:
            Path(log.name).unlink()
        else:
            print(f"  (the server wrote {log.name})")


@dataclass
class ClientTally:
    finished: int = 0
    empty: int = 0
    errors: int = 0
    pull_times: list[float] = field(default_factory=list)
    finish_times: list[float] = field(default_factory=list)
    first_error: str = ""


def http_client(port: int, worker: str, token: str, stop_at: float, tally: ClientTally) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"outcome": "finished"})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            connection.request("POST", f"/v1/workers/{worker}/pull", headers=headers)
            response = connection.getresponse()
            payload = response.read()
            pulled = time.perf_counter()
            tally.pull_times.append(pulled - started)
            if response.status == 204:
                tally.empty += 1
                continue
            if response.status != 200:
                tally.errors += 1
                tally.first_error = (
                    tally.first_error or f"pull {response.status}: {payload[:200]!r}"
                )
                continue
            job_id = json.loads(payload)["id"]
            connection.request("POST", f"/v1/jobs/{job_id}/finish", body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            tally.finish_times.append(time.perf_counter() - pulled)
            if response.status != 200:
                tally.errors += 1
                tally.first_error = (
                    tally.first_error or f"finish {response.status}: {payload[:200]!r}"
                )
                continue
            tally.finished += 1
    except Exception as error:  # a dead connection ends this client; reported, not hidden
        tally.errors += 1
        tally.first_error = tally.first_error or repr(error)
    finally:
        connection.close()


def machine_cpu() -> float:
    """CPU seconds all processes of the machine have used (every core, idle excluded)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class CpuUse:
    server: float = 0.0
    postgres: float = 0.0
    clients: float = 0.0
    machine: float = 0.0
    elapsed: float = 0.0

    def sample(self, pgid: int, database: str) -> CpuUse:
        return CpuUse(
            server=process_cpu(lambda _cmd, fields: fields[2] == str(pgid)),
            postgres=process_cpu(lambda cmd, _f: cmd.startswith("postgres: ") and database in cmd),
            clients=time.process_time(),
            machine=machine_cpu(),
            elapsed=time.perf_counter(),
        )

    def minus(self, other: CpuUse) -> CpuUse:
        return CpuUse(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))


def http_benchmark(
    database: Database, url: str, workers: list[str], seconds: float, processes: int
) -> tuple[float, ClientTally, CpuUse]:
    issued: list[tuple[str, str]] = []
    with database.transaction() as session:
        for worker in workers:
            _row, token = tokens.issue_token(session, role=Role.WORKER, subject=worker)
            issued.append((worker, token))
    total = ClientTally()
    name = make_url(url).database or ""
    with server(url, processes) as (port, pgid):
        tallies = [ClientTally() for _ in issued]
        before = CpuUse().sample(pgid, name)
        stop_at = time.perf_counter() + seconds
        started = time.perf_counter()
        threads = [
            threading.Thread(target=http_client, args=(port, w, t, stop_at, tally))
            for (w, t), tally in zip(issued, tallies, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        used = CpuUse().sample(pgid, name).minus(before)
    for tally in tallies:
        total.finished += tally.finished
        total.empty += tally.empty
        total.errors += tally.errors
        total.pull_times += tally.pull_times
        total.finish_times += tally.finish_times
        total.first_error = total.first_error or tally.first_error
    return total.finished / elapsed, total, used


# ---------------------------------------------------------------------------- explain


def explain_pull(database: Database, worker: str) -> str:
    """The plan of the pull's heads query for one worker (EXPLAIN ANALYZE on PostgreSQL,
    EXPLAIN QUERY PLAN on SQLite)."""
    sql, parameters = heads_statement(database, worker)
    with database.engine.connect() as connection:
        if database.dialect_name == "postgresql":
            rows = connection.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + sql, parameters)
            plan = "\n".join(r[0] for r in rows)
        else:
            rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, parameters)
            plan = "\n".join(f"{r[0]:>4} {r[1]:>4} {r[3]}" for r in rows)
        connection.rollback()
    return plan


def _plan(session: Session, sql: str) -> str:
    if session.get_bind().dialect.name == "postgresql":
        rows = session.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + sql)).all()
        return "\n".join(r[0] for r in rows)
    rows = session.execute(text("EXPLAIN QUERY PLAN " + sql)).all()
    return "\n".join(f"{r[0]:>4} {r[1]:>4} {r[3]}" for r in rows)


def _literal_sql(session: Session, statement: Any) -> str:
    return str(statement.compile(session.get_bind(), compile_kwargs={"literal_binds": True}))


def explain_candidates(database: Database, job_id: int) -> str:
    """The plan of the candidates query of one job."""
    with database.transaction(write=False) as session:
        job = session.get(Job, job_id)
        assert job is not None
        captured: list[str] = []
        original = session.execute

        def capture(statement: Any, *args: Any, **kwargs: Any) -> Any:
            captured.append(_literal_sql(session, statement))
            return original(statement, *args, **kwargs)

        session.execute = capture  # type: ignore[method-assign]
        candidates.job_candidates(session, job)
        session.execute = original  # type: ignore[method-assign]
        return _plan(session, captured[0])


def explain_new_category(database: Database, seed: int) -> str:
    """The plan of the SELECT that evaluates a new category's misfit CASE against
    every worker (on PostgreSQL, EXPLAIN ANALYZE runs it in place of the real one); the
    whole submission is rolled back."""
    rng = random.Random(seed)
    with database.transaction(write=False) as session:
        known = session.scalar(select(func.max(Category.id))) or 0
    for _ in range(50):
        resources, slots = category_definition(rng)
        plan = _explain_submit(database, resources, slots, known)
        if plan is not None:
            return f"(request {resources!r})\n{plan}"
    return "(no new request drawn)"


def _with_values(statement: Any, values: dict[str, Any]) -> Any:
    """The statement with these bound parameters given their values (INSERT has no
    ``params()``), so that a literal rendering shows them."""

    def replace(element: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in values:
            return bindparam(element.key, values[element.key], type_=element.type)
        return None

    return visitors.replacement_traverse(statement, {}, replace)


def _explain_submit(database: Database, resources: str, slots: int, known: int) -> str | None:
    plans: list[str] = []
    new = False
    try:
        with database.transaction() as session:
            connection = session.connection()

            def before_execute(
                conn: Any, statement: Any, multiparams: Any, params: Any, options: Any
            ) -> None:
                # The evaluation of the misfit CASE is the one SELECT bound to a scope.
                bound = params or (multiparams[0] if multiparams else {})
                if isinstance(statement, Select) and SCOPE_PARAM in bound and not plans:
                    # The clauses narrow their sets to the statement's scope, a bound
                    # parameter: bind it, or the plan is of a NULL scope.
                    literal = _literal_sql(session, _with_values(statement, bound))
                    # EXPLAIN ANALYZE runs the statement, whose INSERTs (PostgreSQL's
                    # one-statement write) must not be there when the real one runs.
                    session.execute(text("SAVEPOINT bench_plan"))
                    plans.append(_plan(session, literal))
                    session.execute(text("ROLLBACK TO SAVEPOINT bench_plan"))

            event.listen(connection, "before_execute", before_execute)
            try:
                job = submit_job(
                    session, JobSpec(resources=resources, slots=slots), submitter="bench"
                )
            finally:
                event.remove(connection, "before_execute", before_execute)
            new = job.category_id > known
            raise _Rollback
    except _Rollback:
        pass
    return plans[0] if new and plans else None


def profile(call: Callable[[], object], label: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    print(f"--- cProfile: {label} (top 25 by cumulative time)")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


# ---------------------------------------------------------------------------- one backend


def spread_over_submitters(database: Database, submitters: int) -> None:
    """Give the waiting jobs ``submitters`` submitters (by id, round robin), each a share
    row with some usage of its own (drawn, fixed seed), as a farm shared by that many
    people after a while (docs/ordering.md)."""
    rng = random.Random(SEED + 41)
    names = [f"user{index}" for index in range(submitters)]
    with database.transaction() as session:
        name = literal("user", String) + cast(Job.id % submitters, String)
        session.execute(update(Job).where(Job.state == JobState.WAITING).values(submitter=name))
        now = utcnow()
        for name in names:
            fair_share_usage.book(session, name, rng.uniform(0, 3600), now, 3600.0)


def into_groups(database: Database, submitters: int, groups: int) -> None:
    """Put the ``submitters`` of :func:`spread_over_submitters` into ``groups`` groups
    (round robin; each takes its usage along), as courses of a shared farm."""
    with database.transaction() as session:
        for index in range(submitters):
            fair_shares.set_group(session, f"user{index}", f"group{index % groups}", 3600.0)


def fair_share_comparison(
    database: Database,
    pullers: list[str],
    sizes: Sizes,
    report: Report,
    submitters: int,
    groups: int = 0,
) -> None:
    """Issue 41: the pull with fair share on (heads per category and submitter) against
    the same pull with today's order, on the same data (rolled back: every pull sees the
    same state), the two alternating round by round so that the machine's load weighs on
    both alike. With ``groups``, the submitters are put in that many groups and the pull
    under ``group-share,fair-share,priority,age`` is measured too."""
    spread_over_submitters(database, submitters)
    if groups:
        into_groups(database, submitters, groups)
    analyze(database)
    fair = ordering_policy.Ordering.of("fair-share,priority,age", 3600.0)
    grouped = ordering_policy.Ordering.of("group-share,fair-share,priority,age", 3600.0)
    for ordering in (fair, ordering_policy.DEFAULT, *((grouped,) if groups else ())):
        ordering_policy.use(ordering)
        repeat_rolled_back(database, pullers[:20])  # warm-up: the statements, the caches
    off_rounds: list[list[float]] = []
    on_rounds: list[list[float]] = []
    group_rounds: list[list[float]] = []
    measured = [(ordering_policy.DEFAULT, off_rounds), (fair, on_rounds)]
    if groups:
        measured.append((grouped, group_rounds))
    for _ in range(sizes.rounds):
        for ordering, rounds in measured:
            ordering_policy.use(ordering)
            times, _empty = repeat_rolled_back(database, pullers)
            rounds.append(times)
            print(f"    {ordering.text()}: round p50 {_ms(times)[0]:.2f} ms; {load_average()}")
    ordering_policy.use(ordering_policy.DEFAULT)
    off50, off99, off_note = pooled_rounds(off_rounds)
    on50, on99, on_note = pooled_rounds(on_rounds)
    report.add(
        Figure(
            "pull, fair share off (priority, age)",
            off50,
            off99,
            note=f"{off_note}; {load_average()}",
        )
    )
    report.add(
        Figure(
            f"pull, fair share on ({submitters} submitters)",
            on50,
            on99,
            target="<1.3x off",
            met=on50 < 1.3 * off50 and on99 < 1.3 * off99,
            note=f"{on_note}; p50 {on50 / off50:.2f}x, p99 {on99 / off99:.2f}x of off; "
            f"{load_average()}",
        )
    )
    if groups:
        by50, by99, by_note = pooled_rounds(group_rounds)
        report.add(
            Figure(
                f"pull, group share on ({submitters} submitters in {groups} groups)",
                by50,
                by99,
                target="<1.3x off",
                met=by50 < 1.3 * off50 and by99 < 1.3 * off99,
                note=f"{by_note}; p50 {by50 / off50:.2f}x, p99 {by99 / off99:.2f}x of off; "
                f"{load_average()}",
            )
        )


def pooled_rounds(rounds: list[list[float]]) -> tuple[float, float, str]:
    """p50 and p99 (ms) of every round's samples pooled, and each round's p50 beside
    them: a busy neighbour shows as a round that stands out, and it counts."""
    pooled = [value for samples in rounds for value in samples]
    p50, p99 = _ms(pooled)
    return p50, p99, "round p50s " + "/".join(f"{_ms(r)[0]:.2f}" for r in rounds)


def _scale_pulls(
    database: Database, report: Report, waiting: int, sample: list[str], sizes: Sizes
) -> dict[str, float]:
    """Rolled-back pulls at the current number of waiting jobs (all rounds pooled);
    p50 per kind of worker."""
    kinds = (
        ("ordinary", f"pull, {waiting:,} waiting (rolled back)", sample),
        ("picky", "  picky worker (fits 1 category)", [PICKY_WORKER] * sizes.picky_pulls),
        ("nothing", "  worker that fits no category", [NOTHING_WORKER] * sizes.picky_pulls),
    )
    result = {}
    for kind, label, workers in kinds:
        rounds, empty = [], 0
        for _ in range(sizes.rounds):
            times, empty = repeat_rolled_back(database, workers)
            rounds.append(times)
        p50, p99, note = pooled_rounds(rounds)
        report.add(
            Figure(
                label,
                p50,
                p99,
                note=f"{len(workers)} pulls x {sizes.rounds}, "
                f"{empty} found nothing; {note}; {load_average()}",
            )
        )
        result[kind] = p50
    return result


def run_backend(backend: str, sizes: Sizes, args: argparse.Namespace) -> Report:
    report = Report(backend)
    rng = random.Random(SEED)
    print(f"\n=== {backend} ===", flush=True)
    with scratch_database(backend, keep=args.keep) as url:
        started = time.perf_counter()
        migrate.upgrade(url)
        report.timings["migrate"] = time.perf_counter() - started
        database = Database(url)
        data = Dataset()
        try:
            _run(database, url, backend, sizes, args, rng, data, report)
        finally:
            database.dispose()
    return report


def _run(
    database: Database,
    url: str,
    backend: str,
    sizes: Sizes,
    args: argparse.Namespace,
    rng: random.Random,
    data: Dataset,
    report: Report,
) -> None:
    print(f"  {load_average()}", flush=True)
    # PostgreSQL's JIT can spend seconds compiling each new category's INSERT ... SELECT
    # (see the "new category" figures): off while building, the server default again for
    # measuring (the app may still turn it off on its own connections).
    set_jit(database, False)
    build_workers(database, rng, sizes.workers, data, register_all=args.register_all)
    print(
        f"  {len(data.workers):,} workers: {data.registered:,} registered through upsert_worker "
        f"in {data.timings['workers registered']:.1f} s, {len(data.cloned):,} copied in "
        f"{data.timings.get('workers copied', 0):.1f} s",
        flush=True,
    )
    build_categories(database, rng, sizes.categories, data)
    print(
        f"  {len(data.categories):,} categories through submit_job in "
        f"{data.timings['categories']:.1f} s",
        flush=True,
    )
    if data.cloned:
        checked = verify_clones(
            database, random.Random(SEED + 3).sample(data.cloned, min(20, len(data.cloned)))
        )
        print(f"  {checked} copied workers checked: their misfit rows equal a recache", flush=True)
    report.timings.update(data.timings)
    report.timings[f"jobs to {sizes.small:,}"] = grow_jobs(database, rng, sizes.small, data)
    analyze(database)
    set_jit(database, None)

    submits = new_category_submits(database, SEED + 4, sizes.new_categories)
    n50, _ = _ms(submits)
    report.add(
        Figure(
            f"submit of a job with a new request ({len(data.workers):,} workers)",
            n50,
            max(submits) * 1000,
            note=f"{len(submits)} new categories, rolled back; p99 column = max; server "
            f"defaults; {load_average()}",
        )
    )
    if database.dialect_name == "postgresql":
        submits = new_category_submits(database, SEED + 4, sizes.new_categories, jit=False)
        n50, _ = _ms(submits)
        report.add(Figure("  the same with SET LOCAL jit = off", n50, max(submits) * 1000))

    with database.transaction(write=False) as session:
        misfits = session.scalar(select(func.count()).select_from(CategoryMisfit)) or 0
        fit_rows = session.scalar(select(func.count()).select_from(CategoryFit)) or 0
        fit_listing = (
            session.scalar(select(func.count()).select_from(Category).where(Category.lists_fits))
            or 0
        )
        tag_rows = session.scalar(select(func.count()).select_from(WorkerTag)) or 0
        category_rows = session.scalar(select(func.count()).select_from(Category)) or 0
    pairs = len(data.workers) * category_rows
    report.sizes["workers"] = (
        f"{len(data.workers):,} ({len(data.pullers):,} active ordinary; {data.registered:,} "
        "registered through upsert_worker, the rest copies of their profile's first worker)"
    )
    report.sizes["categories"] = (
        f"{len(data.categories):,} with waiting jobs; {category_rows:,} rows (the others: "
        f"{data.rejected_definitions} drawn requests that no worker fits, their job failed)"
    )
    report.sizes["worker tag rows"] = f"{tag_rows:,}"
    report.sizes["fit cache rows"] = (
        f"{misfits + fit_rows:,} for {pairs:,} pairs: {misfits:,} misfit rows, {fit_rows:,} "
        f"fit rows ({fit_listing:,} of {category_rows:,} categories list their fits, the "
        "smaller side)"
    )

    sample_rng = random.Random(SEED + 1)
    scale_sample = sample_rng.sample(data.pullers, min(sizes.scale_pulls, len(data.pullers)))

    # --- small side of the scaling comparison
    small_waiting = count_waiting(database)
    print(f"  {small_waiting:,} waiting jobs", flush=True)
    repeat_rolled_back(database, scale_sample[:20])  # warm caches and the connection pool
    small = _scale_pulls(database, report, small_waiting, scale_sample, sizes)

    # --- the main data set
    report.timings[f"jobs to {sizes.jobs:,}"] = grow_jobs(database, rng, sizes.jobs, data)
    analyze(database)
    main_waiting = count_waiting(database)
    report.sizes["waiting jobs (main)"] = f"{main_waiting:,}"
    print(f"  {main_waiting:,} waiting jobs", flush=True)
    if args.fair_share:
        pullers = random.Random(SEED + 1).sample(data.pullers, min(sizes.pulls, len(data.pullers)))
        fair_share_comparison(database, pullers, sizes, report, args.submitters, args.groups)
        return

    trips, commits = calibration(database)
    t50, t99 = _ms(trips)
    report.add(Figure("calibration: SELECT 1 round trip", t50, t99, note=load_average()))
    k50, k99 = _ms(commits)
    report.add(
        Figure(
            "calibration: one-row INSERT + COMMIT",
            k50,
            k99,
            note="the disk flush every committed transaction pays",
        )
    )

    pullers = sample_rng.sample(data.pullers, min(sizes.pulls, len(data.pullers)))
    heads = heads_query_alone(database, pullers[:100])
    b50, b99 = _ms(heads)
    report.add(
        Figure(
            "bare SQL: the pull's heads query alone (driver, prepared)",
            b50,
            b99,
            note=f"{len(heads)} workers",
        )
    )
    for worker in pullers[:20]:
        timed_pull(database, worker, commit=True)  # warm-up
    rounds = [
        [timed_pull(database, worker, commit=True) for worker in pullers]
        for _ in range(sizes.rounds)
    ]
    p50, p99, note = pooled_rounds([[t.committed for t in r] for r in rounds])
    timings = [t for r in rounds for t in r]
    done = [t for t in timings if t.job_id is not None]
    report.add(
        Figure(
            f"pull, {main_waiting:,} waiting, committed",
            p50,
            p99,
            target=f"<{PULL_P50_MS:g} / <{PULL_P99_MS:g} ms",
            met=p50 < PULL_P50_MS and p99 < PULL_P99_MS,
            note=f"BEGIN..COMMIT; {len(pullers)} pulls x {sizes.rounds} rounds pooled, by "
            f"{len(set(pullers))} workers, {len(timings) - len(done)} found nothing; "
            f"{note}; {load_average()}",
        )
    )
    if backend == "postgresql":
        express_rounds = [
            [timed_express_pull(database, worker) for worker in pullers]
            for _ in range(sizes.rounds)
        ]
        loop_rounds = [timed_loop_pulls(database, pullers) for _ in range(sizes.rounds)]
        for label, rounds, way in (
            (
                "  the express way, committed",
                express_rounds,
                "on a Core connection in a thread (app/matching/dispatch/express.py; the HTTP"
                " pull's way behind a pooler)",
            ),
            (
                "  the express way on the event loop, committed",
                loop_rounds,
                "the way an HTTP pull takes (app/db/event_loop.py)",
            ),
        ):
            x50, x99, x_note = pooled_rounds(rounds)
            report.add(
                Figure(
                    label,
                    x50,
                    x99,
                    target=f"<{PULL_P50_MS:g} / <{PULL_P99_MS:g} ms",
                    met=x50 < PULL_P50_MS and x99 < PULL_P99_MS,
                    note=f"{way}: the same workers, BEGIN..COMMIT; {x_note}; {load_average()}",
                )
            )
    q50, q99 = _ms([t.pull for t in timings])
    report.add(Figure("  of which BEGIN..pull returned", q50, q99, note="same pulls"))
    e50, e99 = _ms([t.end for t in timings])
    report.add(Figure("  of which its COMMIT", e50, e99, note="same pulls"))
    if done:
        f50, f99 = _ms([t.finish for t in done])
        report.add(Figure("  finish of the pulled job (committed)", f50, f99, note="same pulls"))
    counted_trips = count_round_trips(database, pullers[: min(100, len(pullers))])
    kind = "round trips" if backend == "postgresql" else "statements run by SQLite"
    counted = (
        ("pull", "pulls", counted_trips.pulls, f"; {counted_trips.empty} found nothing"),
        ("finish", "finishes", counted_trips.finishes, ""),
        ("pull, the express way", "pulls that took a job", counted_trips.express_pulls, ""),
        ("finish, the express way", "finishes", counted_trips.express_finishes, ""),
    )
    for request, plural, counts, more in counted:
        if counts:
            report.add(
                Figure(
                    f"  {kind} per committed {request}",
                    statistics.median(counts),
                    max(counts),
                    unit="",
                    note=f"median, max in the p99 column; {len(counts)} {plural}{more}; "
                    "counted at the connection: pre-ping, BEGIN and COMMIT included",
                )
            )
    name = make_url(database.url).database or ""
    before = CpuUse().sample(os.getpid(), name)
    rolled = [repeat_rolled_back(database, pullers)[0] for _ in range(2)]
    used = CpuUse().sample(os.getpid(), name).minus(before)
    r50, r99, note = pooled_rounds(rolled)
    count = sum(len(r) for r in rolled)
    report.add(
        Figure(f"pull, {main_waiting:,} waiting (rolled back, same workers)", r50, r99, note=note)
    )
    report.add(
        Figure(
            "  CPU per rolled-back pull: this process + database",
            (used.clients + used.postgres) / count * 1000,
            None,
            note=f"Python (SQLAlchemy, driver{', SQLite' if backend == 'sqlite' else ''}) "
            f"{used.clients / count * 1000:.2f} ms"
            + (f", PostgreSQL {used.postgres / count * 1000:.2f} ms" if used.postgres else "")
            + f"; wall p50 {r50:.2f} ms",
        )
    )

    # --- ranked candidates, one job of each of several categories
    by_category = rng.sample(data.categories, min(sizes.candidate_jobs, len(data.categories)))
    job_ids: list[int] = []
    with database.transaction(write=False) as session:
        for info in by_category:
            job_id = session.scalar(
                select(func.min(Job.id)).where(
                    Job.category_id == info.id, Job.state == JobState.WAITING
                )
            )
            if job_id is not None:
                job_ids.append(job_id)
    cand_times: list[float] = []
    counts: list[int] = []
    for job_id in job_ids[:5] + job_ids:
        started = time.perf_counter()
        with database.transaction(write=False) as session:
            job = session.get(Job, job_id)
            assert job is not None
            ranked = candidates.job_candidates(session, job)
        cand_times.append(time.perf_counter() - started)
        counts.append(len(ranked))
    cand_times, counts = cand_times[5:], counts[5:]
    c50, c99 = _ms(cand_times)
    report.add(
        Figure(
            "ranked candidates of one job",
            c50,
            c99,
            target=f"p50 <{CANDIDATES_P50_MS:g} ms",
            met=c50 < CANDIDATES_P50_MS,
            note=f"{len(cand_times)} jobs of distinct categories; {statistics.median(counts):.0f} "
            f"candidates median, {max(counts)} max",
        )
    )

    # --- naive baseline on the same data, the same pulls
    naive_workers = pullers[: sizes.naive_pulls]
    ours, _ = repeat_rolled_back(database, naive_workers)
    naive_times: list[float] = []
    cut = 0
    walked: list[int] = []
    agree = 0
    for worker in naive_workers:
        seconds, found, examined = naive_pull(database, worker, sizes.naive_deadline)
        naive_times.append(seconds)
        walked.append(examined)
        cut += found is None and seconds >= sizes.naive_deadline
        agree += timed_pull(database, worker, commit=False).job_id == found
    o50, _ = _ms(ours)
    n50, n99 = _ms(naive_times)
    report.add(
        Figure(
            "naive walk (debusine), same workers",
            n50,
            n99,
            note=f"{len(naive_times)} pulls, {cut} cut at {sizes.naive_deadline:g} s, median "
            f"{statistics.median(walked):,.0f} jobs examined; same job as ours in {agree}",
        )
    )
    report.add(
        Figure(
            "  ratio naive / ours (p50, same workers)",
            n50 / o50,
            None,
            unit="x",
            note=f"ours p50 {o50:.2f} ms rolled back",
        )
    )
    for worker, label in ((PICKY_WORKER, "picky worker"), (NOTHING_WORKER, "fits-nothing worker")):
        seconds, found, examined = naive_pull(database, worker, sizes.naive_deadline)
        mine = timed_pull(database, worker, commit=False).pull
        shown = (
            f">{sizes.naive_deadline:g} s (cut)"
            if found is None and seconds >= sizes.naive_deadline
            else f"{seconds * 1000:,.0f} ms"
        )
        report.add(
            Figure(
                f"  naive walk, {label}",
                seconds * 1000,
                None,
                note=f"{shown}, {examined:,} jobs examined; ours {mine * 1000:.2f} ms; ratio "
                f"{'>' if found is None and seconds >= sizes.naive_deadline else ''}"
                f"{seconds / mine:,.0f}x",
            )
        )

    # --- HTTP: 8 workers pulling and finishing
    if not args.no_http:
        http_workers = random.Random(SEED + 2).sample(data.pullers, sizes.http_clients)
        rate, tally, cpu = http_benchmark(
            database, url, http_workers, sizes.http_seconds, args.http_processes
        )
        is_pg = backend == "postgresql"
        h50, h99 = _ms(tally.pull_times) if tally.pull_times else (None, None)
        report.add(
            Figure(
                f"HTTP: {sizes.http_clients} workers pull+finish, {args.http_processes} procs",
                rate,
                None,
                unit="jobs/s",
                target=f">{HTTP_JOBS_PER_S:g} jobs/s" if is_pg else "(PostgreSQL only)",
                met=(rate >= HTTP_JOBS_PER_S) if is_pg else None,
                note=f"{tally.finished:,} jobs in {sizes.http_seconds:g} s; {tally.empty} empty "
                f"pulls; {tally.errors} errors {tally.first_error}",
            )
        )
        if tally.finished:
            per_job = {
                "server": cpu.server,
                "PostgreSQL": cpu.postgres,
                "clients": cpu.clients,
            }
            own = sum(per_job.values())
            cores = os.cpu_count() or 1
            report.add(
                Figure(
                    "  CPU per job (server + database + clients)",
                    own / tally.finished * 1000,
                    None,
                    note=", ".join(
                        f"{k} {v / tally.finished * 1000:.1f}" for k, v in per_job.items() if v
                    )
                    + f" ms; the machine was {100 * cpu.machine / cpu.elapsed / cores:.0f}% busy"
                    f", {100 * max(0.0, cpu.machine - own) / cpu.elapsed / cores:.0f}% by "
                    f"other processes; {load_average()}",
                )
            )
        if h50 is not None:
            report.add(Figure("  HTTP pull request latency", h50, h99))
        if tally.finish_times:
            g50, g99 = _ms(tally.finish_times)
            report.add(Figure("  HTTP finish request latency", g50, g99))

    # --- large side of the scaling comparison
    if sizes.large and not args.no_large:
        report.timings[f"jobs to {sizes.large:,}"] = grow_jobs(database, rng, sizes.large, data)
        started = time.perf_counter()
        analyze(database)
        report.timings["vacuum/analyze"] = time.perf_counter() - started
        large_waiting = count_waiting(database)
        report.sizes["waiting jobs (large)"] = f"{large_waiting:,}"
        print(f"  {large_waiting:,} waiting jobs", flush=True)
        repeat_rolled_back(database, scale_sample[:20])
        large = _scale_pulls(database, report, large_waiting, scale_sample, sizes)
        for kind, label in (
            ("ordinary", "ordinary workers"),
            ("picky", "picky worker"),
            ("nothing", "fits-nothing worker"),
        ):
            ratio = large[kind] / small[kind]
            report.add(
                Figure(
                    f"scaling {large_waiting:,} / {small_waiting:,} waiting, {label}",
                    ratio,
                    None,
                    unit="x",
                    target=f"<{SCALE_RATIO:g}x",
                    met=ratio < SCALE_RATIO,
                    note=f"p50 {large[kind]:.2f} ms vs {small[kind]:.2f} ms",
                )
            )

    if args.explain:
        print("--- plan of the heads query, ordinary worker")
        print(explain_pull(database, scale_sample[0]))
        print("--- plan of the heads query, picky worker")
        print(explain_pull(database, PICKY_WORKER))
        if job_ids:
            print("--- plan of the candidates query, a job with the median number")
            middle = sorted(range(len(counts)), key=counts.__getitem__)[len(counts) // 2]
            print(explain_candidates(database, job_ids[middle]))
            print("--- plan of the candidates query, the job with the most candidates")
            print(explain_candidates(database, job_ids[counts.index(max(counts))]))
        print("--- plan of the misfit CASE over every worker for a new category (server defaults)")
        print(explain_new_category(database, SEED + 4))
    if args.profile:
        profile(
            lambda: [timed_pull(database, w, commit=True) for w in pullers[:200]],
            "200 pulls, committed and finished",
        )
        if job_ids:
            profile(
                lambda: [_candidates_once(database, j) for j in job_ids[:30]],
                "30 candidate lists",
            )


def _candidates_once(database: Database, job_id: int) -> int:
    with database.transaction(write=False) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return len(candidates.job_candidates(session, job))


# ---------------------------------------------------------------------------- main


def _sizes(args: argparse.Namespace) -> Sizes:
    base = QUICK if args.quick else FULL
    overrides = {
        name: getattr(args, name)
        for name in ("workers", "jobs", "categories")
        if getattr(args, name) is not None
    }
    sizes = Sizes(**{**base.__dict__, **overrides})
    if args.large is not None:
        sizes = Sizes(**{**sizes.__dict__, "large": args.large})
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--workers", type=int, help="workers (default 10,000; quick 1,000)")
    parser.add_argument("--jobs", type=int, help="waiting jobs (default 100,000; quick 10,000)")
    parser.add_argument("--categories", type=int, help="categories (default 500; quick 100)")
    parser.add_argument(
        "--large",
        type=int,
        help="waiting jobs of the large scaling case (default 1,000,000; quick 50,000; 0 skips it)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument("--no-large", action="store_true", help="skip the large scaling case")
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP throughput run")
    parser.add_argument(
        "--http-processes",
        type=int,
        default=2,
        help="uvicorn worker processes of the server (default 2)",
    )
    parser.add_argument("--explain", action="store_true", help="print query plans")
    parser.add_argument("--profile", action="store_true", help="cProfile pulls and candidates")
    parser.add_argument(
        "--register-all",
        action="store_true",
        help="register every worker through upsert_worker (slow) instead of "
        "copying the rows of each machine profile's first worker",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--fair-share",
        action="store_true",
        help="after building the data, compare the pull with fair share on and off (issue "
        "41) and stop",
    )
    parser.add_argument(
        "--submitters", type=int, default=100, help="submitters of --fair-share (default 100)"
    )
    parser.add_argument(
        "--groups",
        type=int,
        default=0,
        help="with --fair-share: put the submitters in this many groups and measure the pull "
        "under group-share,fair-share,priority,age too (default 0: no groups)",
    )
    args = parser.parse_args()
    sizes = _sizes(args)
    backends = ["sqlite", "postgresql"] if args.database == "both" else [args.database]

    print(
        f"jobmatch dispatch benchmark: seed {SEED}; {sizes.workers:,} workers, "
        f"{sizes.jobs:,} waiting jobs, {sizes.categories:,} categories; scaling "
        f"{sizes.small:,} -> {sizes.large:,}; Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs"
    )
    started = time.perf_counter()
    reports = [run_backend(backend, sizes, args) for backend in backends]

    print("\n" + "=" * 100)
    for report in reports:
        print(f"\n{report.database}")
        for name, value in report.sizes.items():
            print(f"  {name:<22} {value}")
        print("  build: " + ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items()))
        print(f"  {'figure':<52} {'p50':>11} {'p99':>11}  {'target':<14} verdict")
        for figure in report.figures:
            print(f"  {_figure_line(figure)}")
    missed = [(r.database, f.label) for r in reports for f in r.figures if f.met is False]
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; targets missed: "
        + ("none" if not missed else "; ".join(f"{d}: {label.strip()}" for d, label in missed))
    )


if __name__ == "__main__":
    main()
