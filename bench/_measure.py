"""What the benches share to measure honestly: the load average, CPU time of this process
and of the database's own processes, round trips counted at the connection, and a scratch
database that is dropped even when the bench fails.

Round trips are counted where they happen, not where SQLAlchemy sees them: a
``before_cursor_execute`` hook misses the pool's pre-ping, the driver's implicit BEGIN and
the COMMIT. On PostgreSQL every pooled connection gets libpq's protocol trace (psycopg's
``PGconn.trace``) and a round trip is a frontend ``Query`` (simple protocol) or ``Sync``
(the end of an extended-protocol exchange; jobmatch does not use pipeline mode, so each
Sync waits for its answer). On SQLite, where there is no network, the figure is the
statements the library ran (``sqlite3`` trace callback), BEGIN and COMMIT included.

Not a test: pytest never collects it.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def postgres_server() -> str:
    """The server the benches use: JOBMATCH_BENCH_POSTGRES_URL, JOBMATCH_TEST_POSTGRES_URL,
    or the local trust-auth server."""
    return (
        os.environ.get("JOBMATCH_BENCH_POSTGRES_URL")
        or os.environ.get("JOBMATCH_TEST_POSTGRES_URL")
        or POSTGRES_SERVER
    )


def load_average() -> str:
    """The 1- and 5-minute load averages, to print beside every figure: this machine is
    shared, and a busy neighbour inflates wall times."""
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


# ---------------------------------------------------------------------------- databases


@contextmanager
def scratch_database(
    backend: str, *, keep: bool = False, prefix: str = "jobmatch_bench"
) -> Iterator[str]:
    """The URL of a new, empty database of the backend (SQLite under /tmp, PostgreSQL on
    :func:`postgres_server`); dropped afterwards, also when the bench fails, unless
    ``keep``."""
    tag = f"{prefix}_{os.getpid()}"
    if backend == "sqlite":
        path = Path(tempfile.gettempdir()) / f"{tag}.db"
        _remove_sqlite(path)
        try:
            yield f"sqlite:///{path}"
        finally:
            if keep:
                print(f"(kept {path})")
            else:
                _remove_sqlite(path)
        return
    server = postgres_server()
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{tag}" WITH (FORCE)'))
            connection.execute(text(f'CREATE DATABASE "{tag}"'))
        try:
            yield make_url(server).set(database=tag).render_as_string(hide_password=False)
        finally:
            if keep:
                print(f"(kept PostgreSQL database {tag})")
            else:
                with admin.connect() as connection:
                    connection.execute(text(f'DROP DATABASE IF EXISTS "{tag}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# ---------------------------------------------------------------------------- CPU


def stat_of(pid: int | str) -> tuple[str, list[str]] | None:
    """A process's name and its /proc stat fields after the name (state, ppid, pgrp...,
    utime and stime at 11 and 12, the reaped children's at 13 and 14); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()


def cpu_of(fields: list[str], *, reaped: bool = False) -> float:
    """CPU seconds (user + system) in a process's stat fields; with ``reaped``, those of
    its children that ended too."""
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def pids_cpu(pids: Iterable[int]) -> float:
    """CPU seconds the processes used so far (0 for one that is gone)."""
    return sum(cpu_of(found[1]) for found in map(stat_of, pids) if found is not None)


def processes_cpu(match: Callable[[str, list[str]], bool]) -> float:
    """CPU seconds (user + system) used so far by the processes ``match`` accepts; it gets
    each one's command line and its /proc stat fields after the name (state, ppid, pgrp...)."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        found = stat_of(entry.name)
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:
            continue
        if found is not None and match(
            cmdline.replace(b"\0", b" ").decode(errors="replace"), found[1]
        ):
            total += cpu_of(found[1])
    return total


def database_backends_cpu(database_name: str) -> float:
    """CPU seconds used so far by every PostgreSQL backend serving ``database_name``
    (``postgres: [cluster:] user db ...`` in /proc; the server runs on this machine). A backend that
    ended before the sample is not counted, so sample while the pool's connections live."""

    def serves(command: str, _fields: list[str]) -> bool:
        # "postgres: [cluster name:] user database host(port) state": the name as a word.
        return command.startswith("postgres: ") and database_name in command.split()

    return processes_cpu(serves)


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds of this process and of the database's backends, and the wall clock."""

    client: float
    database: float
    wall: float

    @classmethod
    def now(cls, url: str) -> CpuSample:
        parsed = make_url(url)
        database = (
            database_backends_cpu(parsed.database or "")
            if parsed.get_backend_name() == "postgresql"
            else 0.0
        )
        return cls(time.process_time(), database, time.perf_counter())

    def minus(self, earlier: CpuSample) -> CpuSample:
        return CpuSample(
            self.client - earlier.client, self.database - earlier.database, self.wall - earlier.wall
        )


# ---------------------------------------------------------------------------- round trips


class RoundTrips:
    """Round trips of every connection the engine opens from now on, counted at the
    connection (see the module docstring). The pool is emptied first so that every
    connection used afterwards is a traced one; :meth:`close` empties it again."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self._files: list[Path] = []
        self._sqlite_count = 0
        engine.dispose()
        event.listen(engine, "connect", self._attach)

    def _attach(self, dbapi_connection: Any, _record: Any) -> None:
        if self.postgres:
            from psycopg import pq

            descriptor, name = tempfile.mkstemp(prefix="jobmatch_trace_")
            self._files.append(Path(name))
            pgconn = dbapi_connection.pgconn
            pgconn.trace(descriptor)
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        else:
            raw: sqlite3.Connection = dbapi_connection
            raw.set_trace_callback(self._sqlite_statement)

    def _sqlite_statement(self, _statement: str) -> None:
        self._sqlite_count += 1

    def count(self) -> int:
        """Round trips so far, over every traced connection."""
        if not self.postgres:
            return self._sqlite_count
        return self.messages("Query", "Sync")

    def messages(self, *kinds: str) -> int:
        """PostgreSQL: the frontend messages of these kinds sent so far, over every traced
        connection (``Bind`` and ``Query``: the statements run)."""
        total = 0
        for path in self._files:
            for line in path.read_text(errors="replace").splitlines():
                parts = line.split("\t", 3)
                if len(parts) >= 3 and parts[0] == "F" and parts[2] in kinds:
                    total += 1
        return total

    def close(self) -> None:
        event.remove(self.engine, "connect", self._attach)
        self.engine.dispose()
        for path in self._files:
            path.unlink(missing_ok=True)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more (``--rounds``, ``--jobs``)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text}")
    return number


def count(text: str) -> int:
    """An argparse type: a whole number of 0 or more (0: skip that part)."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {text}")
    return number
