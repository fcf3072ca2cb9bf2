"""What one pull+finish costs PostgreSQL itself: WAL, backend CPU, statements, row writes.

Run from the repository root::

    .venv/bin/python bench/pg_work.py [--jobs 20000] [--workers 8] [--clients 8] [--cycles 4000]

On a scratch PostgreSQL database (on $JOBMATCH_BENCH_POSTGRES_URL's server, dropped
afterwards) with ``--jobs`` waiting plain jobs and ``--workers`` registered workers (one
slot each), ``--clients`` threads run ``--warmup`` and then ``--cycles`` pull+finish
cycles in all, each thread's workers taking turns, through the functions ``jobmatch
serve``'s express lane runs on PostgreSQL (app/matching/dispatch/express.py: the same
statements, each pull and each finish a transaction of its own on a pooled connection).
Issue 38 compares jobmatch's PostgreSQL work per job with other queues'; this is that
figure, without HTTP or jobmatch's Python in it. ``--clients 1`` runs the cycles one
after the other on one connection: no lock waits and no skipped rows in the figures.

It prints, per pull+finish of the timed cycles:

* ``backend CPU``: utime+stime of the pool's PostgreSQL backends
  (``pg_backend_pid()``, /proc/<pid>/stat; the server runs on this machine), in ms, and
  of every process serving the database (autovacuum workers included, as
  bench/http_floor.py counts it; one that ended between the samples is missed);
* ``WAL``: records, full-page images and bytes from ``pg_stat_wal`` and the byte
  distance of ``pg_current_wal_lsn()``. Both are the whole cluster's: other work on the
  server adds to them (the load average is printed beside them). When this process can
  read the server's WAL directory (root or the postgres user on the server's machine),
  ``pg_waldump`` decodes the range and the records of this database's transactions are
  counted per relation and kind (heap INSERT, HOT_UPDATE, UPDATE, btree INSERT_LEAF,
  COMMIT...): exact, whatever else the server does;
* ``statements`` and ``round trips`` per job, counted at the connection (libpq's trace:
  a ``Bind`` or simple ``Query`` is a statement, a ``Sync`` or ``Query`` a round trip;
  BEGIN and COMMIT included);
* per table, the rows inserted, updated, HOT-updated and deleted (``pg_stat_user_tables``)
  and the index entries those writes made (each insert and each non-HOT update writes
  one entry into every index of the table: an upper bound, since a partial index takes
  only rows its predicate holds for); per index, the blocks touched (``pg_statio``);
* with ``pg_stat_statements`` loaded (``shared_preload_libraries``; not needed
  otherwise), the top statements by total time and by WAL records.

Not a test; never gates CI. ``--keep`` leaves the scratch database for a look.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, event, text  # noqa: E402
from sqlalchemy.engine import Engine, make_url  # noqa: E402

from bench._measure import (  # noqa: E402
    RoundTrips,
    database_backends_cpu,
    load_average,
    scratch_database,
)

WORKER_TAGS = "language: python"
JOB_TAGS = "language: python"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def prepare(url: str, workers: int, jobs: int) -> list[str]:
    """Migrate, register the workers (one slot each) and leave ``jobs`` waiting plain jobs
    of one category (the first through ``submit_job``, the rest copies of its row)."""
    from sqlalchemy import Table, insert

    from app.db import migrate
    from app.db.engine import Database
    from app.db.models import Job, JobState
    from app.matching.submission import JobSpec, submit_job
    from app.matching.workers import WorkerSpec, upsert_worker
    from bench.dispatch import analyze

    migrate.upgrade(url)
    database = Database(url)
    names = [f"w{number:05d}" for number in range(workers)]
    try:
        with database.transaction() as session:
            for name in names:
                upsert_worker(session, WorkerSpec(name=name, resources=WORKER_TAGS, slots=1))
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
        analyze(database)
    finally:
        database.dispose()
    return names


@dataclass
class Served:
    """How the cycles went: jobs the express way pulled and finished, and requests it
    handed to the general way (which this bench does not run: a hand-over means the
    figures do not describe the express way)."""

    jobs: int = 0
    empty: int = 0
    handed_over: int = 0


def cycles(database: Any, names: list[str], count: int, served: Served) -> None:
    """``count`` pull+finish cycles through the express functions, the workers in turn."""
    from app.db.base import utcnow
    from app.matching.dispatch import express

    report = SimpleNamespace(outcome="finished", reason=None, exit_code=0, output=None)
    for number in range(count):
        name = names[number % len(names)]
        with database.core_transaction() as connection:
            pulled = express.pull(connection, name, utcnow())
        if pulled is None:
            served.handed_over += 1
            continue
        if pulled.job is None:
            served.empty += 1
            continue
        with database.core_transaction() as connection:
            ended = express.finish(connection, pulled.job.id, name, report, utcnow())
        if ended is None:
            served.handed_over += 1
        else:
            served.jobs += 1


def run_clients(database: Any, names: list[str], clients: int, count: int) -> Served:
    """``count`` cycles shared by ``clients`` threads, each with its own workers."""
    tallies = [Served() for _ in range(clients)]
    threads = [
        threading.Thread(
            target=cycles,
            args=(database, names[number::clients], count // clients, tallies[number]),
        )
        for number in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Served(
        sum(tally.jobs for tally in tallies),
        sum(tally.empty for tally in tallies),
        sum(tally.handed_over for tally in tallies),
    )


# ---------------------------------------------------------------------------- counters


@dataclass(frozen=True)
class Snapshot:
    """The counters read before and after the timed cycles."""

    cpu: float
    all_cpu: float
    wal: tuple[int, int, int]
    lsn: str
    tables: dict[str, tuple[int, int, int, int]]
    indexes: dict[str, tuple[str, int]]
    index_counts: dict[str, int]


def backend_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) of the backends so far."""
    total = 0
    for pid in set(pids):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # closed: its time is lost (the pool keeps --clients connections)
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICK


def snapshot(stats: Engine, pids: list[int]) -> Snapshot:
    all_cpu = database_backends_cpu(make_url(str(stats.url)).database or "")
    with stats.connect() as connection:
        wal = connection.execute(
            text("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
        ).one()
        lsn = connection.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one()
        tables = {
            row[0]: tuple(row[1:])
            for row in connection.execute(
                text(
                    "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
                    " FROM pg_stat_user_tables"
                )
            )
        }
        indexes = {
            row[0]: (row[1], row[2])
            for row in connection.execute(
                text(
                    "SELECT indexrelname, relname, idx_blks_hit + idx_blks_read"
                    " FROM pg_statio_user_indexes"
                )
            )
        }
        index_counts = {
            row[0]: row[1]
            for row in connection.execute(
                text("SELECT relname, count(*) FROM pg_stat_user_indexes GROUP BY relname")
            )
        }
    return Snapshot(
        backend_cpu(pids),
        all_cpu,
        cast(tuple[int, int, int], tuple(int(value) for value in wal)),
        lsn,
        cast(dict[str, tuple[int, int, int, int]], tables),
        cast(dict[str, tuple[str, int]], indexes),
        index_counts,
    )


def statements_loaded(stats: Engine) -> bool:
    """Whether pg_stat_statements collects (it must be in shared_preload_libraries); its
    view is then created in the scratch database and emptied."""
    with stats.connect() as connection:
        preloaded = connection.execute(text("SHOW shared_preload_libraries")).scalar_one()
        if "pg_stat_statements" not in preloaded:
            return False
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        connection.execute(text("SELECT pg_stat_statements_reset()"))
    return True


def flush_stats(database: Any, count: int) -> None:
    """Make the pool's backends report their pending statistics now (they are otherwise
    sent at most once a second, when a backend goes idle): ``count`` connections at
    once, so that each pooled one is asked."""
    with ExitStack() as stack:
        connections = [stack.enter_context(database.engine.connect()) for _ in range(count)]
        for connection in connections:
            connection.execute(text("SELECT pg_stat_force_next_flush()"))
            connection.commit()
            connection.execute(text("SELECT 1"))
            connection.commit()
    time.sleep(0.2)


# ---------------------------------------------------------------------------- the report


def per_job(value: float, jobs: int) -> str:
    return f"{value / max(jobs, 1):.2f}"


def report(before: Snapshot, after: Snapshot, stats: Engine, jobs: int, trips: RoundTrips) -> None:
    cpu = (after.cpu - before.cpu) * 1000
    records, fpi, wal_bytes = (a - b for a, b in zip(after.wal, before.wal, strict=True))
    with stats.connect() as connection:
        lsn_bytes = connection.execute(
            text("SELECT pg_wal_lsn_diff(:after, :before)"),
            {"after": after.lsn, "before": before.lsn},
        ).scalar_one()
    print(f"per pull+finish ({jobs} jobs; {load_average()}):")
    all_cpu = (after.all_cpu - before.all_cpu) * 1000
    print(
        f"  backend CPU      {per_job(cpu, jobs)} ms (the pool's backends);"
        f" {per_job(all_cpu, jobs)} ms (every process serving the database)"
    )
    print(
        f"  WAL (cluster)    {per_job(records, jobs)} records, {per_job(fpi, jobs)} full pages,"
        f" {per_job(wal_bytes, jobs)} bytes; LSN distance {per_job(float(lsn_bytes), jobs)} bytes"
    )
    print(
        f"  statements       {per_job(trips.messages('Bind', 'Query'), jobs)}"
        f" (round trips {per_job(trips.messages('Sync', 'Query'), jobs)})"
    )
    print("  rows per job     table: inserted updated HOT deleted -> index entries written")
    for table in sorted(after.tables):
        changes = [
            a - b
            for a, b in zip(
                after.tables[table], before.tables.get(table, (0, 0, 0, 0)), strict=True
            )
        ]
        if not any(changes):
            continue
        inserted, updated, hot, deleted = changes
        entries = (inserted + updated - hot) * after.index_counts.get(table, 0)
        print(
            f"    {table:<24} {per_job(inserted, jobs)} {per_job(updated, jobs)}"
            f" {per_job(hot, jobs)} {per_job(deleted, jobs)} -> {per_job(entries, jobs)}"
        )
    print("  index blocks touched per job (pg_statio_user_indexes)")
    touched = sorted(
        (
            (after.indexes[name][1] - before.indexes.get(name, ("", 0))[1], name)
            for name in after.indexes
        ),
        reverse=True,
    )
    for blocks, name in touched:
        if blocks:
            print(f"    {name:<48} {per_job(blocks, jobs)}")


def top_statements(stats: Engine, jobs: int, limit: int) -> None:
    """The statements of this database by total time and by WAL records, per job."""
    with stats.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT calls, total_exec_time + total_plan_time, wal_records, wal_bytes, query"
                " FROM pg_stat_statements"
                " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        ).all()
    calls = sum(row[0] for row in rows)
    wal = sum(row[2] for row in rows)
    wal_bytes = sum(row[3] for row in rows)
    print(
        f"pg_stat_statements (this database): {per_job(calls, jobs)} statements,"
        f" {per_job(wal, jobs)} WAL records, {per_job(wal_bytes, jobs)} WAL bytes per job"
    )
    for title, key in (("total time", 1), ("WAL records", 2)):
        print(f"  top by {title} (per job: calls, ms, WAL records, WAL bytes; query):")
        for row in sorted(rows, key=lambda row: row[key], reverse=True)[:limit]:
            query = " ".join(row[4].split())
            print(
                f"    {per_job(row[0], jobs):>6} {per_job(row[1], jobs):>6}"
                f" {per_job(row[2], jobs):>6} {per_job(row[3], jobs):>8}  {query[:110]}"
            )


# ---------------------------------------------------------------------------- WAL records

_RECORD = re.compile(r"rmgr: (\S+)\s+len \(rec/tot\):\s+\d+/\s*(\d+), tx:\s+(\d+), .*?desc: (\S+)")
_RELATION = re.compile(r"rel (\d+)/(\d+)/(\d+)")


def wal_records(stats: Engine, start: str, end: str) -> dict[tuple[str, str], list[int]] | None:
    """The WAL records between two LSNs written by this database's transactions, counted
    (and their bytes summed) by relation and kind, decoded by ``pg_waldump``; None when it
    cannot read the server's WAL directory (another machine, another user)."""
    with stats.connect() as connection:
        directory = connection.execute(text("SHOW data_directory")).scalar_one()
        bindir = connection.execute(text("SELECT setting FROM pg_config WHERE name = 'BINDIR'"))
        database_oid = connection.execute(
            text("SELECT oid FROM pg_database WHERE datname = current_database()")
        ).scalar_one()
        names = {
            str(row[0]): row[1]
            for row in connection.execute(
                text(
                    "SELECT pg_relation_filenode(oid), relname FROM pg_class WHERE relfilenode <> 0"
                )
            )
        }
        waldump = Path(bindir.scalar_one()) / "pg_waldump"
    wal = Path(directory) / "pg_wal"
    if not os.access(wal, os.R_OK) or not waldump.exists():
        return None
    result = subprocess.run(
        [str(waldump), "-p", str(wal), "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = result.stdout.splitlines()
    ours: set[str] = set()
    parsed = []
    for line in lines:
        record = _RECORD.search(line)
        if record is None:
            continue
        manager, size, transaction, kind = record.groups()
        relation = _RELATION.search(line)
        if relation is not None and relation.group(2) == str(database_oid):
            ours.add(transaction)
        parsed.append((manager, int(size), transaction, kind, relation))
    counted: dict[tuple[str, str], list[int]] = {}
    for manager, size, transaction, kind, relation in parsed:
        if transaction == "0" or transaction not in ours:
            continue
        if relation is not None and relation.group(2) != str(database_oid):
            continue
        name = names.get(relation.group(3), relation.group(3)) if relation else "-"
        tally = counted.setdefault((name, f"{manager} {kind}"), [0, 0])
        tally[0] += 1
        tally[1] += size
    if not counted and result.returncode != 0:
        print(f"(pg_waldump: {result.stderr.strip()[:300]})")
        return None
    return counted


def report_wal(counted: dict[tuple[str, str], list[int]] | None, jobs: int) -> None:
    if counted is None:
        print("(pg_waldump cannot read the WAL here: no per-relation WAL figures)")
        return
    records = sum(tally[0] for tally in counted.values())
    size = sum(tally[1] for tally in counted.values())
    print(
        f"  WAL (this database, pg_waldump) {per_job(records, jobs)} records,"
        f" {per_job(size, jobs)} bytes per job; by relation and kind (records, bytes):"
    )
    for (name, kind), (count, total) in sorted(counted.items(), key=lambda item: -item[1][0]):
        if count * 50 >= jobs:  # 0.02 per job or more
            print(f"    {name:<36} {kind:<26} {per_job(count, jobs):>6} {per_job(total, jobs):>8}")


@contextmanager
def stats_engine(url: str) -> Iterator[Engine]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        yield engine
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="waiting jobs at the start")
    parser.add_argument("--workers", type=int, default=8, help="workers, one slot each")
    parser.add_argument("--clients", type=int, default=8, help="threads pulling at once")
    parser.add_argument("--cycles", type=int, default=4_000, help="timed pull+finish cycles")
    parser.add_argument("--warmup", type=int, default=200, help="untimed cycles first")
    parser.add_argument("--top", type=int, default=8, help="statements listed per ranking")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    if args.cycles + args.warmup > args.jobs:
        parser.error("--jobs must cover --warmup plus --cycles")
    if not 1 <= args.clients <= args.workers:
        parser.error("--clients must be between 1 and --workers")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from app.db.engine import Database

    print(
        f"PostgreSQL work per pull+finish: {args.workers} workers, {args.clients} clients,"
        f" {args.jobs} waiting jobs,"
        f" {args.warmup} + {args.cycles} cycles; {load_average()}",
        flush=True,
    )
    with scratch_database("postgresql", keep=args.keep, prefix="jobmatch_pg_work") as url:
        names = prepare(url, args.workers, args.jobs)
        database = Database(url)
        pids: list[int] = []

        def remember(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
            cursor.close()
            dbapi_connection.commit()

        event.listen(database.engine, "connect", remember)
        try:
            with stats_engine(url) as stats:
                run_clients(database, names, args.clients, args.warmup)
                loaded = statements_loaded(stats)
                trips = RoundTrips(database.engine)  # empties the pool: new, traced backends
                pids.clear()
                flush_stats(database, args.clients)
                before = snapshot(stats, pids)
                started = time.perf_counter()
                served = run_clients(database, names, args.clients, args.cycles)
                wall = time.perf_counter() - started
                flush_stats(database, args.clients)
                after = snapshot(stats, pids)
                print(
                    f"{served.jobs} jobs pulled and finished in {wall:.1f} s"
                    f" ({served.empty} empty pulls, {served.handed_over} handed to the"
                    f" general way; {len(set(pids))} backends)"
                )
                report(before, after, stats, served.jobs, trips)
                report_wal(wal_records(stats, before.lsn, after.lsn), served.jobs)
                if loaded:
                    top_statements(stats, served.jobs, args.top)
                else:
                    print("(pg_stat_statements is not preloaded: no per-statement figures)")
                trips.close()
        finally:
            database.dispose()


if __name__ == "__main__":
    main()
