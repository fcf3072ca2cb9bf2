"""Long-poll dispatch at farm scale (issues 22, 37): thousands of waiting workers, a real server.

Run from the repository root::

    .venv/bin/python bench/longpoll.py                        # 200 workers, PostgreSQL
    .venv/bin/python bench/longpoll.py --workers 10000 --server-workers 2 \\
        --env JOBMATCH_MAX_CONNECTIONS=15000
    .venv/bin/python bench/longpoll.py --workers 2000 --database sqlite

``jobmatch serve --workers P`` (``--server-workers``) runs on a loopback port against a
scratch database: PostgreSQL (JOBMATCH_BENCH_POSTGRES_URL, else JOBMATCH_TEST_POSTGRES_URL,
else the local server) or a SQLite file in the temporary directory. The server keeps its
own settings (JOBMATCH_MAX_CONNECTIONS, 1000 per process, included) except the lease
sweeper, which is off (``JOBMATCH_LEASE_SWEEP_SECONDS=0``: it costs one transaction per
sweep and process, whatever the number of workers), and what ``--env KEY=VALUE`` says.
The bench raises its own open-files limit (RLIMIT_NOFILE) to the hard limit first, and the
server inherits it. The workers and their tokens are written straight to the database, in
one transaction (its time is printed).

The workers wait in ``--client-processes`` K processes (bench/_longpoll_clients.py; by
default one per 2,500 workers), each a raw-asyncio HTTP/1.1 client per worker that pulls
with ``wait=60``, finishes what it gets at once and pulls again; refusals (503, 429...) are
counted by status and retried after their Retry-After. They start at ``--ramp`` per second.
Each worker offers ``java`` and a tag of its own. The script measures, with the load
average beside every figure:

* **waiting workers held**: pulls open with no answer yet (the client processes count
  them) and the server's own count (``jobmatch_longpoll_waiting``), the pulls refused by
  status code and the connections that failed;
* **server memory**: the RSS of each server process (the ``jobmatch serve`` process and its
  children) before the workers came, while they all wait and at the end, and MB per
  waiting worker; beside it each process's open files (mostly its connections: how
  evenly the processes share the listening socket);
* **/healthz latency**, p50/p99 of ``--probes`` probes sent one after another while every
  worker waits, each on a fresh connection (connect, request, answer: what a load balancer
  sees when the accept loop is busy);
* **idle cost**: with every worker waiting and nothing submitted, the transactions the
  database counts for the bench database (PostgreSQL only: ``pg_stat_database``,
  xact_commit + xact_rollback, read from another database so that reading them costs none;
  not measured on SQLite) and the pull attempts the server counts (``/metrics``), per idle
  worker per minute: first over ``--idle-seconds`` within the wait (shortened so that it
  ends before the first pull's deadline: what waiting costs; when the ramp left no such
  window, over ``--idle-seconds`` anyway, labelled "first deadlines too"), then over
  ``--steady-seconds``, longer than the wait (each worker's deadline passes once and it
  pulls again: the price of a bounded wait). pg_stat_statements is not used: it needs
  shared_preload_libraries. A transaction holds at least one statement, so zero
  transactions is zero statements;
* **submit-to-pull latency**, p50 and p99, from the moment the submission is sent (and
  from the moment its 201 arrived) to the moment the worker's pull answer arrived (in the
  client process, on the same monotonic clock), for ``--jobs`` jobs submitted one after
  another (``--gap`` apart): first *targeted* jobs, each fitting one worker only (its own
  tag: the hub wakes that worker alone) among ``--targets`` workers drawn at random (each
  target's category is created once, untimed, before: a new category's misfits are the
  submission's cost, not the wake-up's), then *herd* jobs that every worker fits (the hub
  wakes a relay of waiters, one wins).

A compact table ends the output, also when the run stopped early. The bench's own
requests (submissions, /metrics) are sent again after their Retry-After for up to 20 s;
a /metrics still refused reads NaN, a submission still refused stops the run ("stopped
early"). Targeted jobs are skipped when not every worker's pull is held.

Targets (issue 22): p50 under 20 ms, p99 under 100 ms; 0 statements per idle worker per
minute. On SQLite, use one server process: with several, a submission wakes only the
waiters of the process that took it (SQLite announces in process; with 200 workers and
``--server-workers 2`` a targeted job waited 57.8 s, until its worker's deadline), and
the processes' writers wait on each other's locks (500s: "database is locked", pool
timeouts). Not a test; never gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import multiprocessing
import os
import random
import re
import secrets
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import _longpoll_clients as clients  # noqa: E402
import httpx2  # noqa: E402
from _measure import cpu_of, pids_cpu, postgres_server, scratch_database, stat_of  # noqa: E402
from dispatch import server  # noqa: E402
from sqlalchemy import Table, and_, case, create_engine, func, insert, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.db import migrate, tokens  # noqa: E402
from app.db.base import Base, utcnow  # noqa: E402
from app.db.engine import Database  # noqa: E402
from app.db.models import ApiToken, Role, WorkerNamePart  # noqa: E402
from app.matching.workers import WorkerSpec, upsert_worker  # noqa: E402
from app.notations.flux.hostlist import name_parts  # noqa: E402

WAIT = 60
STATS_SETTLE_SECONDS = 11
WORKERS_PER_CLIENT_PROCESS = 2500
#: Seconds a /healthz probe may take to connect, and to be answered: past it, it failed.
PROBE_TIMEOUT = 5.0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"(load {one:.2f}/{five:.2f})"


def worker_name(index: int) -> str:
    return f"lp{index:05d}"


#: Columns a copied row does not take from its prototype's.
UNCOMPARED = frozenset({"id", "created_at", "updated_at"})


def register(url: str, count: int) -> tuple[dict[str, str], str]:
    """The workers (each offers java and a tag of its own) with their tokens, and a
    submitter token; written straight to the database in one transaction.

    ``upsert_worker`` sends some 20 statements per worker (tags, queue instance, its Grid
    Engine built-in values, name parts, a misfit recache), 10,000 of them took minutes. So
    the first two workers are registered through it, and the others are copies of the
    first one's rows (every table with a ``worker_id``; the name replaced wherever it
    appears; the name parts computed as ``store_worker_name_parts`` does) made with bulk
    INSERTs: the same rows, as no category exists yet, so no misfit row is owed. The copy
    is checked first: the first worker's rows copied for the second must equal the rows
    ``upsert_worker`` wrote for it, else the bench stops. Tokens are hashed as
    ``tokens.issue_token`` does and inserted in bulk too."""
    names = [worker_name(index) for index in range(count)]
    database = Database(url)
    found: dict[str, str] = {}
    with database.transaction() as session:
        for name in names[:2]:
            upsert_worker(
                session,
                WorkerSpec(name=name, resources=f"language: ?java; bench: ?{name}", slots=1),
            )
        if count > 2:
            _copy_workers(session, names[0], names[1], names[2:])
        now = utcnow()
        token_rows = []
        for subject, role in [*((name, Role.WORKER) for name in names), ("bench", Role.SUBMITTER)]:
            found[subject] = "jm_" + secrets.token_urlsafe(32)
            token_rows.append(
                {
                    "token_hash": tokens.hash_token(found[subject]),
                    "role": role,
                    "subject": subject,
                    "label": "",
                    "created_at": now,
                }
            )
        session.execute(insert(ApiToken), token_rows)
    database.dispose()
    submitter = found.pop("bench")
    return found, submitter


def _worker_tables() -> list[Table]:
    """The tables with a worker's rows, parents first (the name parts are computed)."""
    return [
        table
        for table in Base.metadata.sorted_tables
        if "worker_id" in table.c and table.name != WorkerNamePart.__tablename__
    ]


def _rows_of(session: Session, worker_id: int) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for table in _worker_tables():
        rows = session.execute(
            select(table).where(table.c.worker_id == worker_id).order_by(*table.primary_key)
        ).mappings()
        found[table.name] = [dict(row) for row in rows]
    return found


def _copy_of(
    prototype: str,
    rows: dict[str, list[dict[str, Any]]],
    name: str,
    worker_id: int,
    queue_instances: dict[int, int],
) -> dict[str, list[dict[str, Any]]]:
    """The prototype's rows for another worker (ids remapped, the name replaced), without
    the queue instances' own ids, which the database gives."""

    def value(column: str, old: Any, row: dict[str, Any]) -> Any:
        if column == "worker_id":
            return worker_id
        if column == "queue_instance_id" and old is not None:
            return queue_instances[old]
        if column == "object_key" and row.get("level") == "queue_instance":
            return queue_instances[old]
        if column == "object_key" and row.get("level") == "host":
            return worker_id
        if isinstance(old, str) and prototype in old:
            return old.replace(prototype, name)
        return old

    copied = {
        table: [
            {c: value(c, v, row) for c, v in row.items() if c not in UNCOMPARED}
            for row in table_rows
        ]
        for table, table_rows in rows.items()
    }
    copied[WorkerNamePart.__tablename__] = [
        {
            "worker_id": worker_id,
            "prefix": prefix,
            "number": number,
            "digits_len": digits,
            "natural_len": natural,
            "suffix": suffix,
        }
        for prefix, number, digits, natural, suffix in name_parts(name)
    ]
    return copied


def _stored(session: Session, worker_id: int) -> dict[str, list[dict[str, Any]]]:
    rows = _rows_of(session, worker_id)
    parts = Base.metadata.tables[WorkerNamePart.__tablename__]
    rows[parts.name] = [
        dict(row)
        for row in session.execute(
            select(parts).where(parts.c.worker_id == worker_id).order_by(parts.c.id)
        ).mappings()
    ]
    return {
        table: [{c: v for c, v in row.items() if c not in UNCOMPARED} for row in table_rows]
        for table, table_rows in rows.items()
    }


def _copy_workers(session: Session, prototype: str, check: str, names: list[str]) -> None:
    workers = Base.metadata.tables["workers"]
    instances = Base.metadata.tables["queue_instances"]
    ids = dict(session.execute(select(workers.c.name, workers.c.id)).all())
    rows = _rows_of(session, ids[prototype])

    def copy_of(name: str, worker_id: int) -> dict[str, list[dict[str, Any]]]:
        theirs = dict(
            session.execute(
                select(instances.c.queue_id, instances.c.id).where(
                    instances.c.worker_id == worker_id
                )
            ).all()
        )
        mapping = {row["id"]: theirs[row["queue_id"]] for row in rows[instances.name]}
        return _copy_of(prototype, rows, name, worker_id, mapping)

    if copy_of(check, ids[check]) != _stored(session, ids[check]):
        raise RuntimeError(f"copying {prototype}'s rows for {check} differs from upsert_worker's")
    prototype_row = session.execute(select(workers).where(workers.c.id == ids[prototype])).one()
    session.execute(
        insert(workers),
        [
            {
                c: (v.replace(prototype, name) if isinstance(v, str) and prototype in v else v)
                for c, v in prototype_row._mapping.items()
                if c != "id"
            }
            for name in names
        ],
    )
    # Every other table in SQL, INSERT ... SELECT from the prototype's rows and the new
    # worker rows (ids above the checked worker's).
    for table in _worker_tables():
        if rows[table.name]:
            session.execute(_copy_statement(table, ids[prototype], ids[check], prototype, rows))
    new_ids = dict(
        session.execute(select(workers.c.name, workers.c.id).where(workers.c.id > ids[check])).all()
    )
    parts = [
        {
            "worker_id": new_ids[name],
            "prefix": prefix,
            "number": number,
            "digits_len": digits,
            "natural_len": natural,
            "suffix": suffix,
        }
        for name in names
        for prefix, number, digits, natural, suffix in name_parts(name)
    ]
    _bulk_insert(session, Base.metadata.tables[WorkerNamePart.__tablename__], parts)
    for name in {names[0], names[len(names) // 2], names[-1]}:
        if copy_of(name, new_ids[name]) != _stored(session, new_ids[name]):
            raise RuntimeError(f"the copy of {prototype} as {name} differs from upsert_worker's")


def _copy_statement(
    table: Table,
    prototype_id: int,
    after_id: int,
    prototype: str,
    rows: dict[str, list[dict[str, Any]]],
) -> Any:
    """INSERT ... SELECT of the prototype's rows of ``table`` for every worker whose id is
    above ``after_id``: ids remapped (queue instances matched by queue), the name replaced
    in the columns where the prototype's rows hold it."""
    workers = Base.metadata.tables["workers"].alias("w")
    instances = Base.metadata.tables["queue_instances"]
    source = table.alias("src")
    named = {
        column
        for row in rows[table.name]
        for column, value in row.items()
        if isinstance(value, str) and prototype in value
    }
    theirs = instances.alias("qi")
    ours = instances.alias("pq")
    joined = source.join(workers, workers.c.id > after_id)
    by_instance = "queue_instance_id" in table.c
    if by_instance:
        joined = joined.outerjoin(ours, ours.c.id == source.c.queue_instance_id).outerjoin(
            theirs, and_(theirs.c.worker_id == workers.c.id, theirs.c.queue_id == ours.c.queue_id)
        )
    columns, values = [], []
    for column in table.c:
        if column.primary_key and column.name == "id":
            continue
        value: Any = source.c[column.name]
        if column.name == "worker_id":
            value = workers.c.id
        elif column.name == "queue_instance_id":
            value = theirs.c.id
        elif column.name == "object_key" and "level" in table.c:
            whens = [(source.c.level == "host", workers.c.id)]
            if by_instance:
                whens.insert(0, (source.c.level == "queue_instance", theirs.c.id))
            value = case(*whens, else_=source.c.object_key)
        elif column.name in named:
            value = func.replace(source.c[column.name], prototype, workers.c.name)
        columns.append(column.name)
        values.append(value)
    query = (
        select(*values)
        .select_from(joined)
        .where(source.c.worker_id == prototype_id)
        .order_by(workers.c.id, *(source.c[c.name] for c in table.primary_key))
    )
    return insert(table).from_select(columns, query)


def _bulk_insert(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Plain rows (no types that need SQLAlchemy's conversion): COPY on PostgreSQL, an
    executemany on SQLite."""
    if not rows:
        return
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        session.execute(insert(table), rows)
        return
    columns = list(rows[0])
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[c] for c in columns])


# ---------------------------------------------------------------------------- the server


def server_processes(pid: int) -> list[int]:
    """The server's process and its descendants (uvicorn's worker processes)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found = [pid]
    for candidate in sorted(parents):
        ancestor = parents.get(candidate, 0)
        while ancestor > 1:
            if ancestor == pid:
                found.append(candidate)
                break
            ancestor = parents.get(ancestor, 0)
    return found


def rss_mb(pid: int) -> float:
    """VmRSS of a process in MB (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) / 1024 if found else 0.0


def process_label(pid: int, root: int) -> str:
    if pid == root:
        return f"serve {pid}"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"gone {pid}"
    kind = "tracker" if "resource_tracker" in command else "worker"
    return f"{kind} {pid}"


def memory(pid: int) -> dict[int, float]:
    return {process: rss_mb(process) for process in server_processes(pid)}


def postgres_cpu_seconds() -> float:
    """CPU seconds of the PostgreSQL server on this machine, every database's: its live
    processes, and the backends that ended, which the postmaster's children times hold
    once it reaped them (a backend that lives for a few transactions is no process to
    sample by the time the window ends)."""
    total = 0.0
    for entry in os.scandir("/proc"):
        found = stat_of(entry.name) if entry.name.isdigit() else None
        if found is None or not found[0].startswith("postgres"):
            continue
        parent = stat_of(found[1][1])
        postmaster = parent is None or not parent[0].startswith("postgres")
        total += cpu_of(found[1], reaped=postmaster)
    return total


def sessions(database_name: str) -> int:
    """Sessions PostgreSQL established to the database so far (pg_stat_database)."""
    engine = create_engine(postgres_server(), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_stat_clear_snapshot()"))
            value = connection.execute(
                text("SELECT sessions FROM pg_stat_database WHERE datname = :name"),
                {"name": database_name},
            ).scalar_one()
    finally:
        engine.dispose()
    return int(value)


def machine_busy_seconds() -> float:
    """CPU seconds every CPU of the machine spent not idle so far (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuShares:
    """Where the machine's CPU goes over a window, by kind of process: the server's,
    PostgreSQL's (every database's: the machine's server is shared), the client
    processes that hold the workers' pulls, this process (submissions and probes), and
    the rest."""

    def __init__(self, pid: int, clients: list[int], database_name: str | None) -> None:
        self.pid, self.clients, self.database_name = pid, clients, database_name

    def sample(self) -> dict[str, float]:
        return {
            "server": pids_cpu(server_processes(self.pid)),
            "PostgreSQL": postgres_cpu_seconds() if self.database_name else 0.0,
            "clients": pids_cpu(self.clients),
            "bench": pids_cpu([os.getpid()]),
            "machine": machine_busy_seconds(),
        }

    @staticmethod
    def words(before: dict[str, float], after: dict[str, float], seconds: float) -> str:
        used = {kind: after[kind] - before[kind] for kind in before}
        machine = used.pop("machine")
        used["other"] = max(machine - sum(used.values()), 0.0)
        cpus = os.cpu_count() or 1
        shares = ", ".join(f"{kind} {100 * value / seconds:.0f}%" for kind, value in used.items())
        return f"{shares} of one CPU ({cpus} CPUs: {100 * machine / seconds / cpus:.0f}% busy)"


# ---------------------------------------------------------------------------- clients


@dataclass
class Received:
    """What the client processes told: when each job's pull answer arrived (monotonic),
    and each process's latest counts."""

    at: dict[int, float] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    statuses: dict[int, clients.Status] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)

    def total(self) -> clients.Status:
        total = clients.Status()
        for status in self.statuses.values():
            total.workers += status.workers
            total.open += status.open
            if status.oldest_open and (
                not total.oldest_open or status.oldest_open < total.oldest_open
            ):
                total.oldest_open = status.oldest_open
            total.pulls += status.pulls
            total.connects += status.connects
            total.answers.update(status.answers)
            total.finish_refused.update(status.finish_refused)
            total.failures.update(status.failures)
            total.bug = total.bug or status.bug
        return total


class ClientProcesses:
    """K spawned processes holding the workers (bench/_longpoll_clients.py)."""

    def __init__(self, port: int, workers: dict[str, str], count: int, per_second: float) -> None:
        self.received = Received()
        context = multiprocessing.get_context("spawn")
        items = list(workers.items())
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        start_at = time.monotonic() + 1.0  # every process is up by then
        for index in range(count):
            share = items[index::count]
            ours, theirs = context.Pipe()
            process = context.Process(
                target=clients.main,
                args=(theirs, port, share, WAIT, start_at, per_second / count),
                name=f"longpoll-clients-{index}",
                daemon=True,
            )
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)

    def listen(self) -> None:
        loop = asyncio.get_running_loop()
        for index, pipe in enumerate(self.pipes):
            loop.add_reader(pipe.fileno(), self._drain, index, pipe)

    def _drain(self, index: int, pipe: Connection) -> None:
        try:
            while pipe.poll():
                message = pipe.recv()
                if message[0] == "job":
                    self.received.at[message[1]] = message[2]
                    self.received.arrived.set()
                else:
                    self.received.statuses[index] = message[1]
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(pipe.fileno())
            self.received.gone.add(index)

    def rss(self) -> list[float]:
        return [rss_mb(process.pid) for process in self.processes if process.pid]

    async def stop(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send("stop")
        deadline = time.monotonic() + 30
        while len(self.received.gone) < len(self.pipes) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        for index, pipe in enumerate(self.pipes):
            if index not in self.received.gone:
                loop.remove_reader(pipe.fileno())
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()


# ---------------------------------------------------------------------------- figures


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99, ordered[-1]


@dataclass
class Figures:
    """The rows printed at the end: figure, value, load average when measured."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, figure: str, value: str) -> None:
        self.rows.append((figure, value, load()))
        print(f"  {figure}: {value} {load()}")

    def print(self) -> None:
        if not self.rows:
            return
        width = max(len(row[0]) for row in self.rows)
        value_width = max(len(row[1]) for row in self.rows)
        print()
        for figure, value, measured_at in self.rows:
            print(f"{figure:<{width}}  {value:<{value_width}}  {measured_at}")


def refusals(total: clients.Status) -> str:
    refused = {code: n for code, n in total.answers.items() if code not in (200, 204)}
    parts = [f"{n} x {code}" for code, n in sorted(refused.items())] or ["none"]
    if total.finish_refused:
        parts.append(
            "finish "
            + ", ".join(f"{n} x {code}" for code, n in sorted(total.finish_refused.items()))
        )
    if total.failures:
        parts.append(
            "connections: " + ", ".join(f"{n} {kind}" for kind, n in total.failures.most_common())
        )
    return "; ".join(parts)


#: The bench's own requests (submissions, /metrics) the server refused, by status.
ADMIN_REFUSED: Counter[int | str] = Counter()


class Refused(RuntimeError):
    """The server kept refusing one of the bench's own requests."""


async def call(client: httpx2.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx2.Response:
    """A request of the bench's own, sent again after its Retry-After while the server
    refuses it (503: the process has its maximum of connections; 429), for up to 20 s;
    and once more on a new connection when a kept-alive one was closed under it (a run
    at load 9 ended on such a ReadError in its warm-up)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            response = await client.request(method, url, **kwargs)
        except (httpx2.ReadError, httpx2.RemoteProtocolError) as error:
            ADMIN_REFUSED[type(error).__name__] += 1
            response = await client.request(method, url, **kwargs)
        if response.status_code not in (429, 503) or time.monotonic() > deadline:
            return response
        ADMIN_REFUSED[response.status_code] += 1
        try:
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
        except ValueError:
            await asyncio.sleep(1.0)


async def metric(client: httpx2.AsyncClient, name: str) -> float:
    """The sum of a metric's samples (all label sets) in /metrics."""
    response = await call(client, "GET", "/metrics")
    if response.status_code != 200:
        return math.nan  # refused: the figure is unknown
    text_ = response.text
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text_, re.M))


def transactions(database_name: str) -> int:
    engine = create_engine(postgres_server(), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            # The statistics collector flushes a backend's counts at most once a second.
            connection.execute(text("SELECT pg_stat_clear_snapshot()"))
            value = connection.execute(
                text(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :name"
                ),
                {"name": database_name},
            ).scalar_one()
    finally:
        engine.dispose()
    return int(value)


async def submit_and_time(
    client: httpx2.AsyncClient, submitter: str, resources: str, received: Received
) -> tuple[float, float]:
    """Submit one job; the latencies to its pull's answer from the send and from the 201."""
    sent = time.monotonic()
    response = await call(
        client,
        "POST",
        "/v1/jobs",
        json={"resources": resources},
        headers={"Authorization": f"Bearer {submitter}"},
    )
    answered = time.monotonic()
    if response.status_code in (429, 503):
        raise Refused(f"a submission was answered {response.status_code} for 20 s")
    if response.status_code != 201:
        raise RuntimeError(f"submission answered {response.status_code}: {response.text[:300]}")
    job_id = response.json()["id"]
    deadline = time.monotonic() + WAIT + 30
    while job_id not in received.at:
        received.arrived.clear()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeError(f"job {job_id} ({resources}) was not pulled within {WAIT + 30} s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(received.arrived.wait(), timeout=remaining)
    return received.at[job_id] - sent, received.at[job_id] - answered


def latency_rows(table: Figures, label: str, latencies: list[tuple[float, float]]) -> None:
    for index, what in ((0, "from the submission sent"), (1, "from its 201")):
        p50, p99, top = percentiles([1000 * pair[index] for pair in latencies])
        table.add(
            f"{label} submit-to-pull, {what}",
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {top:.1f} ms, n={len(latencies)}",
        )


async def idle_cost(
    admin: httpx2.AsyncClient,
    database_name: str | None,
    workers: int,
    seconds: float,
    label: str,
    table: Figures,
    cpu: CpuShares,
) -> None:
    """Transactions in the database (PostgreSQL) and pull attempts over ``seconds`` with no
    job submitted, per idle worker per minute, and where the CPU went meanwhile."""
    before_pulls = await metric(admin, "jobmatch_dispatch_duration_seconds_count")
    before_quiet = await metric(admin, "jobmatch_longpoll_quiet_renewals_total")
    started = time.monotonic()
    cpu_before = cpu.sample()
    if database_name is not None:
        # PostgreSQL flushes a backend's counts up to 10 s after its last transaction
        # (PGSTAT_IDLE_INTERVAL): let the earlier ones and this scrape's arrive first.
        await asyncio.sleep(STATS_SETTLE_SECONDS)
        before_xacts, before_sessions = transactions(database_name), sessions(database_name)
        await asyncio.sleep(seconds)
        after_xacts = transactions(database_name)
        idle_xacts = after_xacts - before_xacts
        opened = sessions(database_name) - before_sessions
        table.add(
            f"PostgreSQL sessions opened, idle {label}",
            f"{opened} in {seconds:g} s = {opened / seconds:.1f} per second",
        )
        table.add(
            f"transactions, idle {label}",
            f"{idle_xacts} in {seconds:g} s = {idle_xacts * 60 / seconds / workers:.3f} "
            "per idle worker per minute",
        )
    else:
        await asyncio.sleep(seconds)
        table.add(f"transactions, idle {label}", "not measured on SQLite")
    after_pulls = await metric(admin, "jobmatch_dispatch_duration_seconds_count")
    quiet = await metric(admin, "jobmatch_longpoll_quiet_renewals_total") - before_quiet
    pulls = after_pulls - before_pulls
    scraped = time.monotonic() - started
    table.add(f"CPU, idle {label}", CpuShares.words(cpu_before, cpu.sample(), scraped))
    table.add(
        f"pull attempts, idle {label}",
        f"{pulls:g} in {scraped:.0f} s = {pulls * 60 / scraped / workers:.3f} per idle worker "
        "per minute",
    )
    table.add(
        f"renewals without an attempt, idle {label}",
        f"{quiet:g} in {scraped:.0f} s (waits renewed on the worker's last attempt)",
    )


async def until_all_wait(
    admin: httpx2.AsyncClient, received: Received, count: int, timeout: float
) -> tuple[int, float]:
    """Until every worker's pull is open on the client side and waiting on the server's,
    or ``timeout`` passed; what was held then (client side, server side)."""
    deadline = time.monotonic() + timeout
    shown = time.monotonic()
    while True:
        total = received.total()
        waiting = await metric(admin, "jobmatch_longpoll_waiting")
        if total.open >= count and waiting >= count:
            await asyncio.sleep(1.0)  # every first attempt is over
            return received.total().open, await metric(admin, "jobmatch_longpoll_waiting")
        if total.bug:
            raise RuntimeError(f"a client coroutine failed: {total.bug}")
        now = time.monotonic()
        if now > deadline:
            print(f"  only {total.open} pulls open, {waiting:g} waiting of {count} {load()}")
            return total.open, waiting
        if now - shown > 5:
            shown = now
            print(
                f"  {total.open} pulls open, {waiting:g} waiting, {total.connects} connections "
                f"opened; refused: {refusals(total)} {load()}"
            )
        await asyncio.sleep(0.5)


async def healthz_probes(port: int, count: int) -> tuple[list[float], Counter[str]]:
    """Seconds of ``count`` GET /healthz, one after another, each on a fresh connection."""
    request = clients.request_bytes("GET", "/healthz", f"127.0.0.1:{port}", None, close=True)
    found, failed = [], Counter[str]()
    for _ in range(count):
        started = time.monotonic()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), PROBE_TIMEOUT
            )
            try:
                writer.write(request)
                status, _, _ = await asyncio.wait_for(clients.read_response(reader), PROBE_TIMEOUT)
            finally:
                writer.close()
        except (OSError, TimeoutError, clients.Closed, asyncio.IncompleteReadError) as error:
            failed[type(error).__name__] += 1
            continue
        if status == 200:
            found.append(time.monotonic() - started)
        else:
            failed[str(status)] += 1
    return found, failed


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def memory_rows(table: Figures, label: str, pid: int, now: dict[int, float]) -> None:
    each = ", ".join(f"{process_label(p, pid)} {mb:.0f}" for p, mb in now.items())
    table.add(f"server RSS, {label} (MB)", f"total {sum(now.values()):.0f}: {each}")
    files = ", ".join(f"{process_label(p, pid)} {open_files(p)}" for p in now)
    table.add(f"server open files, {label}", files)


# ---------------------------------------------------------------------------- the run


async def run(args: argparse.Namespace, port: int, pid: int, url: str) -> None:
    workers, submitter = args.registered
    names = list(workers)
    table: Figures = args.table
    postgres = make_url(url).get_backend_name() == "postgresql"
    database_name = (make_url(url).database or "") if postgres else None
    baseline = memory(pid)
    memory_rows(table, "before the workers came", pid, baseline)
    started = time.monotonic()
    processes = ClientProcesses(port, workers, args.client_processes, args.ramp)
    processes.listen()
    received = processes.received
    cpu = CpuShares(pid, [p.pid for p in processes.processes if p.pid], database_name)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=base, timeout=WAIT + 30) as admin:
            timeout = 120 + len(names) / args.ramp
            try:
                held, waiting = await until_all_wait(admin, received, len(names), timeout)
                total = received.total()
                table.add(
                    "waiting workers held",
                    f"{held} of {len(names)} pulls open (client side), {waiting:g} waiting "
                    f"(server side), after {time.monotonic() - started:.0f} s",
                )
                table.add("refused so far", refusals(total))
                now = memory(pid)
                memory_rows(table, "all waiting", pid, now)
                grown = sum(now.values()) - sum(baseline.values())
                counted = waiting if waiting > 0 else held  # NaN when /metrics was refused
                table.add(
                    "server MB per waiting worker",
                    f"{grown / max(counted, 1):.4f} over the baseline, "
                    f"{sum(now.values()) / max(counted, 1):.4f} in all",
                )
                client_rss = processes.rss()
                table.add(
                    "client processes RSS (MB)",
                    f"{len(client_rss)} processes, " + ", ".join(f"{mb:.0f}" for mb in client_rss),
                )

                # While they wait: a window that ends before the first pull's deadline.
                total = received.total()
                oldest = total.oldest_open or time.monotonic()
                window = oldest + WAIT - time.monotonic() - STATS_SETTLE_SECONDS - 3
                window = min(args.idle_seconds, window)
                label = "while waiting"
                if window < 5:
                    # The ramp took so long that the first deadlines are near: measure
                    # anyway, and say that deadline pulls fall in the window.
                    window, label = args.idle_seconds, "while waiting, first deadlines too"
                await idle_cost(admin, database_name, len(names), window, label, table, cpu)

                probes, failed = await healthz_probes(port, args.probes)
                others = "".join(f", {n} x {what}" for what, n in failed.most_common())
                if probes:
                    p50, p99, top = percentiles([1000 * s for s in probes])
                    table.add(
                        "/healthz while all wait (fresh connection each)",
                        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {top:.1f} ms, "
                        f"{len(probes)} of {args.probes} answered 200{others}",
                    )
                else:
                    table.add("/healthz while all wait", f"no probe answered 200{others}")

                rng = random.Random(22)
                targets = rng.sample(names, min(args.targets, len(names)))
                if held < len(names):
                    # A job for one worker could wait for a worker the server keeps refusing.
                    targets = []
                    table.add("targeted jobs", "skipped: not every worker's pull is held")
                # Warm-up: each targeted category once (its misfits are computed at its first
                # submission, which is the submission's cost, not the wake-up's), and the herd's.
                warm = time.monotonic()
                for name in targets:
                    await submit_and_time(admin, submitter, f"bench: {name}", received)
                await submit_and_time(admin, submitter, "language: java", received)
                table.add(
                    "warm-up",
                    f"{len(targets)} targeted categories and the herd's in "
                    f"{time.monotonic() - warm:.1f} s",
                )
                if args.steady_seconds > 0:
                    # A window longer than the wait: every worker's deadline passes once in it
                    # and it pulls again (the price of a bounded wait).
                    await idle_cost(
                        admin,
                        database_name,
                        len(names),
                        args.steady_seconds,
                        "steady, deadlines too",
                        table,
                        cpu,
                    )

                series: list[tuple[str, Callable[[], str]]] = [
                    ("targeted", lambda: f"bench: {rng.choice(targets)}"),
                    ("herd", lambda: "language: java"),
                ][0 if targets else 1 :]
                for label, pick in series:
                    await until_all_wait(admin, received, len(names), timeout=60)
                    wakeups_before = await metric(admin, "jobmatch_longpoll_wakeups_total")
                    checks_before = await metric(admin, "jobmatch_longpoll_fit_checks_total")
                    latencies = []
                    series_started, cpu_before = time.monotonic(), cpu.sample()
                    for _ in range(args.jobs):
                        latencies.append(await submit_and_time(admin, submitter, pick(), received))
                        await asyncio.sleep(args.gap)
                    wakeups = (
                        await metric(admin, "jobmatch_longpoll_wakeups_total") - wakeups_before
                    )
                    checks = (
                        await metric(admin, "jobmatch_longpoll_fit_checks_total") - checks_before
                    )
                    latency_rows(table, label, latencies)
                    table.add(
                        f"CPU, {label} jobs",
                        CpuShares.words(
                            cpu_before, cpu.sample(), time.monotonic() - series_started
                        ),
                    )
                    table.add(
                        f"{label} wake-ups",
                        f"{wakeups / args.jobs:.1f} waiters woken and {checks / args.jobs:.2f} fit "
                        "statements per job",
                    )
            except Refused as error:
                table.add("stopped early", str(error))
            finally:
                memory_rows(table, "at the end", pid, memory(pid))
                total = received.total()
                table.add(
                    "pulls at the end",
                    f"{total.open} open, {total.pulls} sent, {total.connects} connections opened",
                )
                table.add("refused in all", refusals(total))
                table.add(
                    "the bench's own requests refused",
                    ", ".join(f"{n} x {code}" for code, n in sorted(ADMIN_REFUSED.items(), key=str))
                    or "none",
                )
    finally:
        await processes.stop()


def settings(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise SystemExit(f"--env wants KEY=VALUE, not {pair!r}")
        found[key] = value
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=200, help="waiting workers")
    parser.add_argument(
        "--server-workers", type=int, default=1, help="jobmatch serve --workers (processes)"
    )
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument(
        "--client-processes",
        type=int,
        default=None,
        help=f"processes holding the workers (default: one per {WORKERS_PER_CLIENT_PROCESS})",
    )
    parser.add_argument(
        "--ramp", type=float, default=1000.0, help="workers starting to pull per second"
    )
    parser.add_argument("--jobs", type=int, default=200, help="jobs per latency series")
    parser.add_argument("--targets", type=int, default=200, help="workers the targeted jobs go to")
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between submissions")
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="idle window within the wait"
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=70.0,
        help="idle window longer than the wait (0: skip)",
    )
    parser.add_argument("--probes", type=int, default=200, help="/healthz probes")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for the server (repeatable), e.g. JOBMATCH_MAX_CONNECTIONS=15000",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    if args.client_processes is None:
        args.client_processes = max(1, -(-args.workers // WORKERS_PER_CLIENT_PROCESS))
    args.client_processes = max(1, min(args.client_processes, args.workers))
    soft, hard = clients.raise_open_files_limit()  # the server inherits it
    os.environ["JOBMATCH_LEASE_SWEEP_SECONDS"] = "0"
    extra = settings(args.env)
    os.environ.update(extra)
    table = args.table = Figures()
    print(
        f"bench/longpoll.py: {args.workers} workers in {args.client_processes} client "
        f"processes, {args.server_workers} server processes, {args.database}, "
        f"{os.cpu_count()} CPUs, open files {soft}/{hard}, "
        f"server settings {extra or 'as they are'} {load()}"
    )
    with scratch_database(args.database, keep=args.keep) as url:
        migrate.upgrade(url)
        started = time.monotonic()
        args.registered = register(url, args.workers)
        table.add(
            "registration",
            f"{args.workers} workers and tokens in one transaction in "
            f"{time.monotonic() - started:.1f} s",
        )
        try:
            with server(url, args.server_workers) as (port, pid):
                asyncio.run(run(args, port, pid, url))
        finally:
            table.print()


if __name__ == "__main__":
    main()
