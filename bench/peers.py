"""jobmatch beside the PostgreSQL job queues people install instead (issue 38).

Run from the repository root, with the peers installed (the ``bench`` extra)::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/peers.py [--rounds 3] [--jobs 3000] [--consumers 8]
    .venv/bin/python bench/peers.py --systems jobmatch --modes one-by-one --rounds 1

One run puts three systems on the same PostgreSQL server ($JOBMATCH_BENCH_POSTGRES_URL,
$JOBMATCH_TEST_POSTGRES_URL or the local trust-auth server), each round in a scratch
database of its own per system (dropped afterwards, also on failure), and moves ``--jobs``
no-op jobs through each of them with ``--consumers`` (8) producers and consumers:

* **procrastinate** (an asyncio app on a psycopg pool, run with ``asyncio.run`` as its
  command line does): enqueue ``defer`` (one job per call, from 8 concurrent tasks) and
  ``batch_defer`` (``--bulk-size`` jobs per call); drain ``worker``: one worker of
  concurrency 8 running a no-op async task, ``wait=False`` (it stops once caught up).
* **pgqueuer** (psycopg connections in autocommit, on uvloop as its ``pgq`` command runs):
  enqueue ``one-by-one`` (8 concurrent tasks, each on its own connection) and ``batched``
  (``--bulk-size`` jobs per ``enqueue`` call); drain ``batch1`` and ``batch10``: 8 queue
  managers, each on its own connection, dequeuing 1 or 10 jobs at a time for a no-op
  entrypoint, in drain mode.
* **jobmatch**: ``jobmatch serve --workers 2`` (``--processes``) on the scratch database,
  8 workers registered over HTTP (10 slots each) and a submitter token. Enqueue
  ``one-per-request`` (8 threads, one ``POST /v1/jobs`` each) and ``bulk-submit``
  (``POST /v1/jobs/bulk``, ``--bulk-size`` jobs a request); drain with 8 client threads,
  one worker each: ``one-by-one`` (``POST /v1/workers/{name}/pull`` then
  ``POST /v1/jobs/{id}/finish``), ``finish-carrying`` (``POST .../pull-batch?max=1``
  carrying the previous job's finish) and ``batch-pull`` (``max=10``, carrying the
  previous batch's finishes). A route the server answers 404 or 405 (not merged yet) is
  reported as ``mode X: route not available`` and skipped.
* **floor** (not a queue): the least any server on this stack does per job of a drain of
  one request per job (:class:`FloorApp`: a bare ASGI callable under the same uvicorn
  with as many processes, one PostgreSQL transaction of one primary-key UPDATE per
  request on psycopg's asyncio connection), drained by the same client threads with
  ``--jobs`` requests. ``ratio drain floor/procrastinate`` says how far past
  procrastinate this stack can go at all with one request per job, and ``ratio drain
  finish-carrying/floor`` how much of that jobmatch's finish-carrying drain reaches.

A round runs each system once, in turn (the order turns round by round, so that no system
always goes first): enqueue N jobs with one enqueue mode, drain them with one drain mode,
and again until every mode of the system ran once (the modes pair up in order; the shorter
list starts over). A drain after the first finds the earlier ones' finished rows in the
tables, as a live queue's history would be.

A drain's time runs from its first request to its last job's completion written to the
database: for jobmatch the last finish answered; for the peers the last call of the
library's own method that writes completions (procrastinate's ``JobManager.finish_job``,
pgqueuer's ``Queries.log_jobs``, wrapped to count), not the end of their shutdown
(pgqueuer's managers take seconds to stop their buffers, heartbeats and listeners).

For every enqueue and drain it prints jobs/s, the CPU milliseconds per job of each kind of
process (the app server processes: jobmatch's only, ``-`` for the peers, whose producers
and consumers are this script's own process; the PostgreSQL server: the postmaster's
children from /proc, that is the backends of the scratch database and the server's own
processes — checkpointer, WAL writer... — but not the backends of other databases, since
the server is shared; the clients: this process), and the load average when it started.
Then the medians over the rounds, and last the ratios of jobmatch to each peer, for drain
and for enqueue, one line each (``ratio drain one-by-one/procrastinate 0.68``), each the
median of the rounds' ratios.

The figures below came from procrastinate 3.10.0 and pgqueuer 1.6.0 on psycopg 3.3.9 and
PostgreSQL 15.20 (autovacuum off: hence the ANALYZE before each drain), on this 2-CPU
machine with nothing else running (load 2.3 at the start, 2.6 to 3.4 during the modes):
the default ``--rounds 3 --jobs 3000``, medians, jobs/s (issue 38, 2026-11-30, the second
of three runs; the machine ran everything about a third slower than the day before)::

    procrastinate  enqueue defer 2,061, batch_defer 16,702; drain worker 550
    pgqueuer       enqueue one-by-one 2,692, batched 38,420; drain batch1 773, batch10 4,395
    jobmatch       enqueue one-per-request 837, bulk-submit 24,426;
                   drain one-by-one 447, finish-carrying 692, batch-pull 2,043
    floor          drain one-request 2,099
    ratio drain finish-carrying/procrastinate 1.24, /pgqueuer-batch1 0.89
    ratio drain batch-pull/procrastinate 3.63, /pgqueuer-batch10 0.46
    ratio drain floor/procrastinate 3.81, finish-carrying/floor 0.33
    ratio enqueue bulk-submit/procrastinate-batch_defer 1.47, /pgqueuer-batched 0.63

CPU per drained job, finish-carrying: jobmatch's server 1.08 ms, PostgreSQL 1.33 ms
(pgqueuer batch1: 1.30 ms PostgreSQL, 0.75 ms in its process; procrastinate: 0.84 ms and
1.23 ms; the floor: 0.44 ms and 0.17 ms). With ``--stale-statistics`` (20:38, load 2.4 to
3.2) procrastinate drained 376 jobs/s on 1.74 ms of PostgreSQL CPU per job, jobmatch's
finish-carrying 728 on 1.28 ms: 1.95 times procrastinate. A short drain pays for warming
up: jobmatch's batch-pull alone drained 2,595 jobs/s with ``--jobs 3000`` and 3,694 with
``--jobs 12000`` (the day before). The run prints the versions it found.
Not a test; never gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import logging
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._measure import (  # noqa: E402
    positive_int,
    postgres_server,
    processes_cpu,
    scratch_database,
)

PROCRASTINATE = "procrastinate"
PGQUEUER = "pgqueuer"
JOBMATCH = "jobmatch"
#: Not a system: the least any server on this stack does per job of a drain of one
#: request per job (see :func:`floor_round`).
FLOOR = "floor"
SYSTEMS = (PROCRASTINATE, PGQUEUER, JOBMATCH, FLOOR)

#: Each system's enqueue and drain modes, in the order they pair up.
ENQUEUE_MODES = {
    PROCRASTINATE: ("defer", "batch_defer"),
    PGQUEUER: ("one-by-one", "batched"),
    JOBMATCH: ("one-per-request", "bulk-submit"),
}
DRAIN_MODES = {
    PROCRASTINATE: ("worker",),
    PGQUEUER: ("batch1", "batch10"),
    JOBMATCH: ("one-by-one", "finish-carrying", "batch-pull"),
    FLOOR: ("one-request",),
}
#: The jobmatch modes --modes chooses among (one-per-request always runs: it fills).
JOBMATCH_MODES = ("one-by-one", "finish-carrying", "batch-pull", "bulk-submit")
#: The jobmatch modes that need a route being built in parallel, and how to probe it.
NEW_ROUTES = {
    "finish-carrying": "/v1/workers/probe/pull-batch?max=1",
    "batch-pull": "/v1/workers/probe/pull-batch?max=10",
    "bulk-submit": "/v1/jobs/bulk",
}
#: Jobs a pull-batch asks for, per mode.
PULL_BATCH = {"finish-carrying": 1, "batch-pull": 10}
#: Slots of each jobmatch worker: enough for a batch of ``batch-pull``.
WORKER_SLOTS = 10
ADMIN_TOKEN = "peers-bench-admin"
#: What every worker offers and every job asks for (Momotor tags), as bench/http_floor.py:
#: one category, so that the figures are the queue's path, not the search's.
WORKER_TAGS = "language: python"
JOB_TAGS = "language: python"
#: The peers' modes every jobmatch ratio is taken to, for each phase.
DRAIN_PEERS = ((PROCRASTINATE, "worker"), (PGQUEUER, "batch1"), (PGQUEUER, "batch10"))
ENQUEUE_PEERS = {
    "one-per-request": ((PROCRASTINATE, "defer"), (PGQUEUER, "one-by-one")),
    "bulk-submit": ((PROCRASTINATE, "batch_defer"), (PGQUEUER, "batched")),
}


# ---------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far of each kind of process, and the wall clock."""

    server: float
    postgres: float
    clients: float
    wall: float


class Meter:
    """Samples the CPU of the app server's processes (one process group), of the
    PostgreSQL server's processes that serve the scratch database, and of this process."""

    def __init__(self, url: str, server_group: int | None = None) -> None:
        from sqlalchemy.engine import make_url

        self.database = make_url(url).database or ""
        self.server_group = server_group
        self.postmaster = _postmaster(url)

    def sample(self) -> Cpu:
        server = (
            processes_cpu(lambda _cmd, fields: fields[2] == str(self.server_group))
            if self.server_group is not None
            else math.nan
        )
        postgres = (
            processes_cpu(
                lambda cmd, fields: (
                    fields[1] == str(self.postmaster) and _serves(cmd, self.database)
                )
            )
            if self.postmaster is not None
            else math.nan
        )
        return Cpu(server, postgres, time.process_time(), time.perf_counter())


def _postmaster(url: str) -> int | None:
    """The PostgreSQL server's main process: the parent of a backend of ``url``; None when
    the server does not run on this machine (its processes are not in /proc)."""
    import psycopg

    with psycopg.connect(libpq(url)) as connection:
        row = connection.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    try:
        stat = Path(f"/proc/{row[0]}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _serves(command: str, database: str) -> bool:
    """Whether a child of the postmaster works for ``database``: a client backend or an
    autovacuum worker of it, or one of the server's own processes (checkpointer, WAL
    writer, background writer...), which every database's commits use."""
    words = command.split()
    backend = any(word == "[local]" or (word.endswith(")") and "(" in word) for word in words)
    if backend or "autovacuum worker" in command:
        return database in words
    return command.startswith("postgres")


@dataclass(frozen=True)
class Figure:
    """One enqueue or drain of one mode."""

    system: str
    phase: str  # "enqueue" or "drain"
    mode: str
    jobs: int
    rate: float
    #: CPU milliseconds per job: app server, PostgreSQL, clients (NaN: not measured).
    server: float
    postgres: float
    clients: float
    load: float
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.system, self.phase, self.mode)


def figure(
    system: str, phase: str, mode: str, jobs: int, load: float, before: Cpu, after: Cpu, note: str
) -> Figure:
    per = 1000 / max(jobs, 1)
    elapsed = max(after.wall - before.wall, 1e-9)
    return Figure(
        system,
        phase,
        mode,
        jobs,
        jobs / elapsed,
        (after.server - before.server) * per,
        (after.postgres - before.postgres) * per,
        (after.clients - before.clients) * per,
        load,
        note,
    )


def _ms(value: float) -> str:
    return "    -" if math.isnan(value) else f"{value:5.2f}"


def line(item: Figure) -> str:
    text = (
        f"  {item.system:<13} {item.phase:<7} {item.mode:<15} {item.rate:7.0f} jobs/s"
        f"   CPU ms per job: server {_ms(item.server)}, PostgreSQL {_ms(item.postgres)},"
        f" clients {_ms(item.clients)}   load {item.load:.1f}"
    )
    return text + (f"\n  {'':<13} {item.note}" if item.note else "")


@dataclass
class Results:
    """Every figure of the run, by round, and the modes found missing."""

    rounds: list[list[Figure]] = field(default_factory=list)
    unavailable: set[str] = field(default_factory=set)

    def add(self, item: Figure) -> None:
        self.rounds[-1].append(item)
        print(line(item), flush=True)


def libpq(url: str) -> str:
    """The libpq URI of a SQLAlchemy URL (``postgresql+psycopg://`` -> ``postgresql://``)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def analyze(url: str, args: argparse.Namespace) -> None:
    """ANALYZE the scratch database between an enqueue and its drain, for every system
    alike: what autovacuum's auto-analyze does on a default server after thousands of
    inserts. Without it, on a server with autovacuum off (this machine's), each drain ran
    on the statistics of an empty table: jobmatch's drain, whose statements join jobs to
    categories and queue instances, was planned for empty tables, and so was
    procrastinate's fetch. ``--stale-statistics`` leaves them so: issue 38's first
    figures were taken that way (procrastinate drained 370 jobs/s with 1.96 ms of
    PostgreSQL CPU per job; with statistics, 2-3 times as fast on a third of the CPU)."""
    if args.stale_statistics:
        return
    import psycopg

    with psycopg.connect(libpq(url), autocommit=True) as connection:
        connection.execute("ANALYZE")


def pairs(enqueues: list[str], drains: list[str]) -> list[tuple[str, str]]:
    """The (enqueue, drain) steps of a round: every mode once, in order, the shorter list
    starting over."""
    steps = max(len(enqueues), len(drains))
    return [(enqueues[n % len(enqueues)], drains[n % len(drains)]) for n in range(steps)]


def split(total: int, parts: int) -> list[int]:
    """``total`` jobs shared as evenly as can be among ``parts`` producers."""
    return [total // parts + (n < total % parts) for n in range(parts)]


def chunks(total: int, size: int) -> list[int]:
    """``total`` jobs as batches of at most ``size``."""
    return [min(size, total - start) for start in range(0, total, size)]


# ---------------------------------------------------------------------------- procrastinate


def procrastinate_round(url: str, args: argparse.Namespace, results: Results) -> None:
    import procrastinate

    # It warns that the app lives in the main module, which is this bench's own choice.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    consumers = args.consumers
    connector = procrastinate.PsycopgConnector(
        conninfo=libpq(url), min_size=consumers + 2, max_size=consumers + 2
    )
    app = procrastinate.App(connector=connector)
    done = [0]

    @app.task(name="noop")
    async def noop() -> None:
        done[0] += 1

    async def enqueue(mode: str) -> None:
        if mode == "defer":
            shares = split(args.jobs, consumers)

            async def producer(count: int) -> None:
                for _ in range(count):
                    await noop.defer_async()

            await asyncio.gather(*(producer(count) for count in shares))
        else:
            for size in chunks(args.jobs, args.bulk_size):
                await noop.batch_defer_async(*({} for _ in range(size)))

    async def drain(_mode: str) -> None:
        await app.run_worker_async(  # wait=False: it stops once a fetch finds no job
            concurrency=consumers,
            wait=False,
            install_signal_handlers=False,
            listen_notify=False,
        )

    async def main() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            meter = Meter(url)
            for enqueue_mode, drain_mode in pairs(
                list(ENQUEUE_MODES[PROCRASTINATE]), list(DRAIN_MODES[PROCRASTINATE])
            ):
                results.add(await timed(meter, "enqueue", enqueue_mode, args.jobs, enqueue))
                await asyncio.to_thread(analyze, url, args)
                done[0] = 0
                completions = Completions(meter, args.jobs)
                # The job's final state is written by JobManager.finish_job, one call a job.
                finish = app.job_manager.finish_job
                wrapped = completions.wrap(finish, lambda *_a, **_k: 1)
                app.job_manager.finish_job = wrapped  # type: ignore[method-assign]
                outcome = await timed(meter, "drain", drain_mode, args.jobs, drain, completions)
                app.job_manager.finish_job = finish  # type: ignore[method-assign]
                if done[0] != args.jobs:
                    outcome = _noted(outcome, f"ran {done[0]} of {args.jobs} jobs")
                results.add(outcome)

    async def timed(
        meter: Meter,
        phase: str,
        mode: str,
        jobs: int,
        action: Callable[[str], Awaitable[None]],
        completions: Completions | None = None,
    ) -> Figure:
        load = os.getloadavg()[0]
        before = meter.sample()
        await action(mode)
        after = completions.after() if completions else meter.sample()
        return figure(PROCRASTINATE, phase, mode, jobs, load, before, after, "")

    asyncio.run(main())


def _noted(item: Figure, note: str) -> Figure:
    return Figure(**{**item.__dict__, "note": note})


class Completions:
    """Counts the completions a peer has written to its database, through its own
    method that writes them; the drain ends (and its CPU is sampled) when the last one is
    written, not when the library's shutdown (buffers, heartbeats, listeners) is over."""

    def __init__(self, meter: Meter, jobs: int, then: Callable[[], None] = lambda: None):
        self.meter = meter
        self.jobs = jobs
        self.then = then
        self.written = 0
        self.end: Cpu | None = None

    def wrap(self, write: Callable[..., Awaitable[Any]], count: Callable[..., int]) -> Any:
        async def written(*args: Any, **kwargs: Any) -> Any:
            answer = await write(*args, **kwargs)
            self.written += count(*args, **kwargs)
            if self.end is None and self.written >= self.jobs:
                self.end = self.meter.sample()
                self.then()
            return answer

        return written

    def after(self) -> Cpu:
        """The sample at the last completion (now, when fewer were written)."""
        return self.end or self.meter.sample()


# ---------------------------------------------------------------------------- pgqueuer


def pgqueuer_round(url: str, args: argparse.Namespace, results: Results) -> None:
    import uvloop

    uvloop.run(_pgqueuer_round(url, args, results))


async def _pgqueuer_round(url: str, args: argparse.Namespace, results: Results) -> None:
    import psycopg
    from pgqueuer import PsycopgDriver, Queries, QueueManager
    from pgqueuer.domain.types import QueueExecutionMode

    conninfo = libpq(url)
    consumers = args.consumers

    async def connections() -> list[psycopg.AsyncConnection[Any]]:
        return [
            await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            for _ in range(consumers)
        ]

    async def close(opened: list[psycopg.AsyncConnection[Any]]) -> None:
        for connection in opened:
            await connection.close()

    setup = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    await Queries(PsycopgDriver(setup)).install()
    await setup.close()
    meter = Meter(url)
    for enqueue_mode, drain_mode in pairs(
        list(ENQUEUE_MODES[PGQUEUER]), list(DRAIN_MODES[PGQUEUER])
    ):
        # Enqueue: 8 producers, each on its own connection.
        opened = await connections()
        queries = [Queries(PsycopgDriver(connection)) for connection in opened]
        load = os.getloadavg()[0]
        before = meter.sample()
        if enqueue_mode == "one-by-one":
            shares = split(args.jobs, consumers)

            async def producer(query: Queries, count: int) -> None:
                for _ in range(count):
                    await query.enqueue("noop", None)

            await asyncio.gather(*(producer(q, c) for q, c in zip(queries, shares, strict=True)))
        else:
            for size in chunks(args.jobs, args.bulk_size):
                await queries[0].enqueue(["noop"] * size, [None] * size, [0] * size)
        after = meter.sample()
        await close(opened)
        results.add(figure(PGQUEUER, "enqueue", enqueue_mode, args.jobs, load, before, after, ""))

        # Drain: 8 queue managers, each on its own connection, until the queue is empty.
        await asyncio.to_thread(analyze, url, args)
        batch = int(drain_mode.removeprefix("batch"))
        opened = await connections()
        managers = [QueueManager(Queries(PsycopgDriver(connection))) for connection in opened]
        done = [0]

        def register(manager: QueueManager, done: list[int]) -> None:
            @manager.entrypoint("noop")
            async def noop(_job: Any) -> None:
                done[0] += 1

        def stop(managers: list[Any] = managers) -> None:
            for manager in managers:  # every job is done: no manager waits for more
                manager.shutdown.set()

        completions = Completions(meter, args.jobs, stop)
        for manager in managers:
            register(manager, done)
            # A manager's completions are buffered and written by Queries.log_jobs, a
            # list of (job, status, traceback) a call.
            repository = manager.queries
            repository.log_jobs = completions.wrap(repository.log_jobs, len)  # type: ignore[method-assign]
        load = os.getloadavg()[0]
        before = meter.sample()
        await asyncio.wait_for(
            asyncio.gather(
                *(
                    manager.run(batch_size=batch, mode=QueueExecutionMode.drain)
                    for manager in managers
                )
            ),
            timeout=args.timeout,
        )
        after = completions.after()
        await close(opened)
        note = "" if done[0] == args.jobs else f"ran {done[0]} of {args.jobs} jobs"
        results.add(figure(PGQUEUER, "drain", drain_mode, args.jobs, load, before, after, note))


# ---------------------------------------------------------------------------- jobmatch


class Http:
    """A keep-alive loopback HTTP client with a bearer token (reconnects once when the
    server closed an idle connection)."""

    def __init__(self, port: int, token: str | None) -> None:
        self.port = port
        self.headers = {"Content-Type": "application/json"}
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"
        self.connection: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = None if body is None else json.dumps(body)
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                self.connection.request(method, path, body=payload, headers=self.headers)
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if response.getheader("connection", "").lower() == "close":
                self.close()
            try:
                answer = json.loads(data) if data else None
            except ValueError:
                answer = data[:200]
            return response.status, answer
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


@contextmanager
def jobmatch_server(url: str, processes: int) -> Iterator[tuple[int, int]]:
    """``jobmatch serve --workers N`` on a free loopback port (its own process group);
    yields (port, process group), stops it afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        JOBMATCH_DATABASE_URL=url,
        JOBMATCH_ADMIN_TOKEN=ADMIN_TOKEN,
        JOBMATCH_LOG_LEVEL="WARNING",
        JOBMATCH_LOG_FORMAT="text",
    )
    command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", str(processes), "--no-migrate"]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 60
            client = Http(port, None)
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"jobmatch serve exited with {process.returncode}: {tail}")
                try:
                    if client.request("GET", "/healthz")[0] == 200:
                        break
                except OSError:
                    client.close()
                if time.monotonic() > deadline:
                    raise RuntimeError("jobmatch serve did not answer within 60 s")
                time.sleep(0.2)
            client.close()
            time.sleep(1.5)  # every worker process up before the clock starts
            yield port, process.pid
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def route_available(port: int, path: str) -> bool:
    """Whether the server has the route: an unknown one answers 404 (or 405 when another
    method has that path) before any token is looked at."""
    client = Http(port, None)
    try:
        status, _ = client.request("POST", path, {})
    finally:
        client.close()
    return status not in (404, 405)


@dataclass
class Tally:
    """What one client thread did."""

    jobs: int = 0
    empty: int = 0
    error: str = ""


class Shared:
    """The jobs the drain's threads took, together: a thread stops on an empty answer once
    every job was taken (before that an empty answer is a race; it asks again)."""

    def __init__(self, total: int, deadline: float) -> None:
        self.total = total
        self.deadline = deadline
        self.taken = 0
        self.lock = threading.Lock()

    def take(self, count: int) -> None:
        with self.lock:
            self.taken += count

    def all_taken(self) -> bool:
        with self.lock:
            return self.taken >= self.total


def submit_thread(client: Http, batches: list[int], bulk: bool, tally: Tally) -> None:
    """POST the jobs: one a request, or ``batches`` of them through the bulk route."""
    body = {"resources": JOB_TAGS}
    try:
        for size in batches:
            if bulk:
                status, answer = client.request("POST", "/v1/jobs/bulk", {"jobs": [body] * size})
                if status != 201 or answer.get("count") != size:
                    raise RuntimeError(f"bulk submission answered {status}: {str(answer)[:200]}")
                tally.jobs += size
            else:
                for _ in range(size):
                    status, answer = client.request("POST", "/v1/jobs", body)
                    if status != 201:
                        raise RuntimeError(f"submission answered {status}: {str(answer)[:200]}")
                    tally.jobs += 1
    except Exception as error:  # reported with the figures, not hidden
        tally.error = repr(error)
    finally:
        client.close()


def drain_one_by_one(client: Http, worker: str, shared: Shared, tally: Tally) -> None:
    """Pull, then finish the job the pull gave; until every job was taken."""
    finish = {"outcome": "finished", "exit_code": 0}
    try:
        while time.perf_counter() < shared.deadline:
            status, answer = client.request("POST", f"/v1/workers/{worker}/pull")
            if status == 204:
                tally.empty += 1
                if shared.all_taken():
                    return
                time.sleep(0.005)
                continue
            if status != 200:
                raise RuntimeError(f"pull answered {status}: {str(answer)[:200]}")
            shared.take(1)
            status, answer = client.request("POST", f"/v1/jobs/{answer['id']}/finish", finish)
            if status != 200:
                raise RuntimeError(f"finish answered {status}: {str(answer)[:200]}")
            tally.jobs += 1
        tally.error = "stopped at the deadline"
    except Exception as error:
        tally.error = repr(error)
    finally:
        client.close()


def drain_batches(client: Http, worker: str, most: int, shared: Shared, tally: Tally) -> None:
    """Pull up to ``most`` jobs a request, carrying the finishes of the previous answer's
    jobs; until every job was taken and every finish was carried."""
    carried: list[dict[str, Any]] = []
    path = f"/v1/workers/{worker}/pull-batch?max={most}"
    try:
        while time.perf_counter() < shared.deadline:
            status, answer = client.request(
                "POST", path, {"finished": carried} if carried else None
            )
            if status != 200:
                raise RuntimeError(f"pull-batch answered {status}: {str(answer)[:200]}")
            acknowledged = answer.get("finished") or []
            if len(acknowledged) != len(carried):
                raise RuntimeError(f"carried {len(carried)} finishes, {len(acknowledged)} answered")
            wrong = [item for item in acknowledged if item.get("state") != "finished"]
            if wrong:
                raise RuntimeError(f"a carried finish answered {wrong[0]}")
            tally.jobs += len(carried)
            jobs = answer.get("jobs") or []
            carried = [{"job_id": job["id"], "outcome": "finished", "exit_code": 0} for job in jobs]
            if jobs:
                shared.take(len(jobs))
                continue
            tally.empty += 1
            if shared.all_taken():
                return
            time.sleep(0.005)
        tally.error = "stopped at the deadline"
    except Exception as error:
        tally.error = repr(error)
    finally:
        client.close()


def run_threads(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measured_threads(
    threads: list[threading.Thread],
    tallies: list[Tally],
    meter: Meter,
    key: tuple[str, str, str],
    expected: int,
    results: Results,
) -> int:
    """Run the client threads of one enqueue or drain (``key``: system, phase, mode)
    between two samples of the meter, add its figure to the results; the jobs done."""
    load = os.getloadavg()[0]
    before = meter.sample()
    run_threads(threads)
    after = meter.sample()
    done = sum(tally.jobs for tally in tallies)
    note = _tally_note(tallies, expected, done)
    results.add(figure(*key, done, load, before, after, note))
    return done


def _tally_note(tallies: list[Tally], jobs: int, done: int) -> str:
    notes = []
    if done != jobs:
        notes.append(f"{done} of {jobs} jobs")
    errors = [tally.error for tally in tallies if tally.error]
    if errors:
        notes.append(f"a client stopped: {errors[0]}")
    return "; ".join(notes)


def jobmatch_round(url: str, args: argparse.Namespace, results: Results) -> None:
    from app.db import migrate

    migrate.upgrade(url)
    with jobmatch_server(url, args.processes) as (port, group):
        admin = Http(port, ADMIN_TOKEN)
        workers: list[tuple[str, str]] = []
        for number in range(args.consumers):
            name = f"peer{number:02d}"
            status, answer = admin.request(
                "POST",
                "/v1/workers",
                {"name": name, "resources": WORKER_TAGS, "slots": WORKER_SLOTS},
            )
            if status not in (200, 201):
                raise RuntimeError(f"registering {name} answered {status}: {answer}")
            workers.append((name, answer["token"]))
        status, answer = admin.request(
            "POST", "/v1/tokens", {"role": "submitter", "subject": "peers-bench"}
        )
        if status not in (200, 201):
            raise RuntimeError(f"a submitter token answered {status}: {answer}")
        submitter = answer["token"]
        admin.close()

        wanted = [mode for mode in JOBMATCH_MODES if mode in args.modes]
        available = []
        for mode in wanted:
            if mode in NEW_ROUTES and not route_available(port, NEW_ROUTES[mode]):
                results.unavailable.add(mode)
                print(f"  mode {mode}: route not available", flush=True)
            else:
                available.append(mode)
        enqueues = ["one-per-request"] + [m for m in available if m in ENQUEUE_MODES[JOBMATCH]]
        drains = [m for m in available if m in DRAIN_MODES[JOBMATCH]] or ["one-by-one"]
        meter = Meter(url, group)
        for enqueue_mode, drain_mode in pairs(enqueues, drains):
            # Enqueue: 8 submitter threads.
            bulk = enqueue_mode == "bulk-submit"
            sizes = chunks(args.jobs, args.bulk_size if bulk else 1)
            tallies = [Tally() for _ in range(args.consumers)]
            threads = [
                threading.Thread(
                    target=submit_thread,
                    args=(Http(port, submitter), sizes[n :: args.consumers], bulk, tallies[n]),
                )
                for n in range(args.consumers)
            ]
            key = (JOBMATCH, "enqueue", enqueue_mode)
            done = measured_threads(threads, tallies, meter, key, args.jobs, results)

            # Drain: 8 worker threads, each its own worker and token.
            analyze(url, args)
            shared = Shared(done, time.perf_counter() + args.timeout)
            tallies = [Tally() for _ in range(args.consumers)]
            threads = [
                threading.Thread(
                    target=drain_one_by_one,
                    args=(Http(port, token), name, shared, tallies[n]),
                )
                if drain_mode == "one-by-one"
                else threading.Thread(
                    target=drain_batches,
                    args=(Http(port, token), name, PULL_BATCH[drain_mode], shared, tallies[n]),
                )
                for n, (name, token) in enumerate(workers)
            ]
            measured_threads(
                threads, tallies, meter, (JOBMATCH, "drain", drain_mode), done, results
            )


# ---------------------------------------------------------------------------- the floor

#: The floor's table: 64 counters, each request adds one to one of them.
FLOOR_TABLE = "bench_peers_floor"
_FLOOR_UPDATE = f"UPDATE {FLOOR_TABLE} SET n = n + 1 WHERE id = %s RETURNING n"


class FloorApp:
    """The least a server on this stack can do per job of a drain, one request per job:
    a bare ASGI callable under the same uvicorn (httptools, uvloop) with as many
    processes as jobmatch, that reads the request's JSON body and runs one PostgreSQL
    transaction on psycopg's asyncio connection (BEGIN, one UPDATE by primary key with
    RETURNING, COMMIT: the commit's WAL flush every real take and finish pays), then
    answers a small JSON object. No framework, no routing, no authentication, no
    matching: what jobmatch's express lane does around its SQL, without its SQL.
    Connections are kept per process, one per request in flight."""

    def __init__(self) -> None:
        self.idle: list[Any] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        import psycopg

        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        report = json.loads(body) if body else {}
        job = int(scope["path"].split("/")[3])
        connection = (
            self.idle.pop()
            if self.idle
            else await psycopg.AsyncConnection.connect(libpq(os.environ["JOBMATCH_FLOOR_URL"]))
        )
        try:
            async with connection.transaction():
                cursor = await connection.execute(_FLOOR_UPDATE, (job % 64,))
                row = await cursor.fetchone()
        finally:
            self.idle.append(connection)
        answer = json.dumps({"id": job, "state": report.get("outcome"), "n": row[0]}).encode()
        headers = [(b"content-type", b"application/json")]
        headers.append((b"content-length", str(len(answer)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


floor_app = FloorApp()


def floor_drain(client: Http, first: int, count: int, tally: Tally) -> None:
    """``count`` requests, one per job, each carrying a finish as jobmatch's
    finish-carrying drain does."""
    finish = {"outcome": "finished", "exit_code": 0}
    try:
        for job in range(first, first + count):
            status, answer = client.request("POST", f"/v1/jobs/{job}/finish", finish)
            if status != 200:
                raise RuntimeError(f"the floor answered {status}: {str(answer)[:200]}")
            tally.jobs += 1
    except Exception as error:
        tally.error = repr(error)
    finally:
        client.close()


def floor_round(url: str, args: argparse.Namespace, results: Results) -> None:
    """The floor (:class:`FloorApp`) drained by the same client threads as jobmatch, one
    request per job: if it cannot reach a drain figure, no design of jobmatch's drain on
    this stack (uvicorn, Python, a transaction per request) can."""
    import psycopg

    from bench.http_floor import serve

    with psycopg.connect(libpq(url), autocommit=True) as connection:
        connection.execute(f"CREATE TABLE {FLOOR_TABLE} (id INTEGER PRIMARY KEY, n INTEGER)")
        connection.execute(f"INSERT INTO {FLOOR_TABLE} SELECT g, 0 FROM generate_series(0, 63) g")
    env = {"JOBMATCH_FLOOR_URL": url}
    with serve("bench.peers:floor_app", False, args.processes, env) as (port, group):
        meter = Meter(url, group)
        shares = split(args.jobs, args.consumers)
        tallies = [Tally() for _ in shares]
        threads = [
            threading.Thread(
                target=floor_drain,
                args=(Http(port, "floor"), 1 + sum(shares[:n]), shares[n], tallies[n]),
            )
            for n in range(len(shares))
        ]
        measured_threads(
            threads, tallies, meter, (FLOOR, "drain", "one-request"), args.jobs, results
        )


# ---------------------------------------------------------------------------- summary

ROUND = {
    PROCRASTINATE: procrastinate_round,
    PGQUEUER: pgqueuer_round,
    JOBMATCH: jobmatch_round,
    FLOOR: floor_round,
}


def medians(results: Results) -> list[Figure]:
    """Per mode, the median of every figure over the rounds (and of the starting loads)."""
    by_key: dict[tuple[str, str, str], list[Figure]] = {}
    for figures in results.rounds:
        for item in figures:
            by_key.setdefault(item.key, []).append(item)
    out = []
    for (system, phase, mode), items in by_key.items():

        def middle(values: list[float]) -> float:
            known = [value for value in values if not math.isnan(value)]
            return statistics.median(known) if known else math.nan

        out.append(
            Figure(
                system,
                phase,
                mode,
                int(statistics.median(item.jobs for item in items)),
                middle([item.rate for item in items]),
                middle([item.server for item in items]),
                middle([item.postgres for item in items]),
                middle([item.clients for item in items]),
                middle([item.load for item in items]),
                f"({len(items)} runs)" if len(items) != len(results.rounds) else "",
            )
        )
    return out


def ratios(results: Results) -> list[str]:
    """jobmatch over each peer, for drain and enqueue: the median of the rounds' ratios
    (within a round, each side's median when a mode ran more than once)."""

    def rate(figures: list[Figure], key: tuple[str, str, str]) -> float | None:
        rates = [item.rate for item in figures if item.key == key]
        return statistics.median(rates) if rates else None

    pairs_wanted: list[tuple[str, tuple[str, str, str], tuple[str, str, str]]] = []
    for mode in DRAIN_MODES[JOBMATCH]:
        for system, peer_mode in DRAIN_PEERS:
            label = system if system == PROCRASTINATE else f"{system}-{peer_mode}"
            pairs_wanted.append(
                (
                    f"ratio drain {mode}/{label}",
                    (JOBMATCH, "drain", mode),
                    (system, "drain", peer_mode),
                )
            )
    floor = (FLOOR, "drain", "one-request")
    pairs_wanted.append(
        (f"ratio drain floor/{PROCRASTINATE}", floor, (PROCRASTINATE, "drain", "worker"))
    )
    pairs_wanted.append(
        ("ratio drain finish-carrying/floor", (JOBMATCH, "drain", "finish-carrying"), floor)
    )
    for mode, peers in ENQUEUE_PEERS.items():
        for system, peer_mode in peers:
            pairs_wanted.append(
                (
                    f"ratio enqueue {mode}/{system}-{peer_mode}",
                    (JOBMATCH, "enqueue", mode),
                    (system, "enqueue", peer_mode),
                )
            )
    lines = []
    for label, ours, theirs in pairs_wanted:
        values = []
        for figures in results.rounds:
            mine, peer = rate(figures, ours), rate(figures, theirs)
            if mine is not None and peer:
                values.append(mine / peer)
        if values:
            lines.append(f"{label} {statistics.median(values):.2f}")
    return lines


def versions(systems: list[str]) -> str:
    names = {PROCRASTINATE: ["procrastinate"], PGQUEUER: ["pgqueuer"], JOBMATCH: [], FLOOR: []}
    found = []
    for package in [name for system in systems for name in names[system]] + ["psycopg"]:
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found)


def postgres_version(url: str) -> str:
    import psycopg

    with psycopg.connect(libpq(url)) as connection:
        row = connection.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds (default 3)")
    parser.add_argument("--jobs", type=positive_int, default=3000, help="jobs per mode (3000)")
    parser.add_argument(
        "--consumers", type=positive_int, default=8, help="producers and consumers (default 8)"
    )
    parser.add_argument(
        "--processes", type=positive_int, default=2, help="jobmatch serve's processes (default 2)"
    )
    parser.add_argument(
        "--bulk-size",
        type=positive_int,
        default=1000,
        help="jobs per batched enqueue: batch_defer, pgqueuer's list enqueue and jobmatch's"
        " POST /v1/jobs/bulk (default 1000; the route takes up to 1000)",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEMS,
        default=list(SYSTEMS),
        help="the systems to run (default all three and the floor)",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=JOBMATCH_MODES,
        default=list(JOBMATCH_MODES),
        help="jobmatch's modes (default all; one-per-request submission always runs)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds a drain may take (default 300)"
    )
    parser.add_argument(
        "--stale-statistics",
        action="store_true",
        help="no ANALYZE before each drain: the planner statistics of a server with"
        " autovacuum off, as issue 38's first figures were measured (see analyze())",
    )
    args = parser.parse_args()
    # A SIGTERM (a timeout, a stopped job) ends the run through its ``finally`` blocks: the
    # server stops and the scratch databases are dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    systems = []
    for system in args.systems:
        try:
            if system not in (JOBMATCH, FLOOR):
                __import__(system)
            systems.append(system)
        except ImportError:
            print(f"{system}: not installed (pip install -e '.[bench]'); skipped")
    server = postgres_version(postgres_server())
    print(
        f"peers: {args.jobs} no-op jobs per mode, {args.consumers} producers and consumers,"
        f" {args.rounds} round{'s' * (args.rounds > 1)},"
        f" jobmatch serve --workers {args.processes}; {server};"
        f" {versions(systems)}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results = Results()
    for number in range(args.rounds):
        print(f"round {number + 1}", flush=True)
        results.rounds.append([])
        turn = number % max(len(systems), 1)
        for system in systems[turn:] + systems[:turn]:
            with scratch_database("postgresql", prefix=f"jobmatch_peers_{system}") as url:
                ROUND[system](url, args, results)
    if not any(results.rounds):
        return
    print(f"medians over {args.rounds} round{'s' * (args.rounds > 1)}")
    for item in medians(results):
        print(line(item))
    for mode in sorted(results.unavailable):
        print(f"mode {mode}: route not available")
    for text in ratios(results):
        print(text)


if __name__ == "__main__":
    main()
