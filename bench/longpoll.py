"""Long-poll dispatch on PostgreSQL (issue 22): 200 waiting workers, a real server.

Run from the repository root::

    .venv/bin/python bench/longpoll.py [--workers 200] [--jobs 200] [--idle-seconds 30]

``jobmatch serve`` runs on a loopback port against a scratch PostgreSQL database
(JOBMATCH_BENCH_POSTGRES_URL, else JOBMATCH_TEST_POSTGRES_URL, else the local server).
Every worker is an asyncio task with an httpx client that pulls with ``wait=60``, finishes
what it gets at once and pulls again. The script measures:

* **idle cost**: with every worker waiting and nothing submitted, the transactions the
  database counts for the bench database (``pg_stat_database``: xact_commit +
  xact_rollback, read from another database so that reading them costs none) and the pull
  attempts the server counts (``/metrics``), per idle worker per minute: first over
  ``--idle-seconds`` within the wait (what waiting costs), then over ``--steady-seconds``,
  longer than the wait (each worker's deadline passes once and it pulls again: the price
  of a bounded wait). pg_stat_statements is not used: it needs shared_preload_libraries. A
  transaction holds at least one statement, so zero transactions is zero statements. The
  lease sweeper is off (``JOBMATCH_LEASE_SWEEP_SECONDS=0``): it costs one transaction per
  sweep and process, whatever the number of workers;
* **submit-to-pull latency**, p50 and p99, from the moment the submission is sent (and
  from the moment its 201 arrived) to the moment the worker's pull answer arrived, for
  ``--jobs`` jobs submitted one after another (``--gap`` apart): first *targeted* jobs,
  each fitting one worker only (a tag only that worker offers: the hub wakes that worker
  alone), then *herd* jobs that every worker fits (every waiter wakes, one wins, the others
  lose the race and wait again).

Targets (issue 22): p50 under 20 ms, p99 under 100 ms; 0 statements per idle worker per
minute. The load average is printed beside every figure. Not a test; never gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx2  # noqa: E402
from dispatch import POSTGRES_SERVER, scratch_database, server  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app.db import migrate, tokens  # noqa: E402
from app.db.engine import Database  # noqa: E402
from app.db.models import Role  # noqa: E402
from app.matching.workers import WorkerSpec, upsert_worker  # noqa: E402

WAIT = 60
STATS_SETTLE_SECONDS = 11


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"(load {one:.2f}/{five:.2f})"


def worker_name(index: int) -> str:
    return f"lp{index:04d}"


def register(url: str, count: int) -> tuple[dict[str, str], str]:
    """The workers (each offers java and a tag of its own) with their tokens, and a
    submitter token; written straight to the database."""
    database = Database(url)
    found: dict[str, str] = {}
    with database.transaction() as session:
        for index in range(count):
            name = worker_name(index)
            upsert_worker(
                session,
                WorkerSpec(name=name, resources=f"language: ?java; bench: ?{name}", slots=1),
            )
            _row, found[name] = tokens.issue_token(session, role=Role.WORKER, subject=name)
        _row, submitter = tokens.issue_token(session, role=Role.SUBMITTER, subject="bench")
    database.dispose()
    return found, submitter


@dataclass
class Received:
    """When each job's pull answer arrived, by job id; pull attempts per worker."""

    at: dict[int, float] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    stop: bool = False


async def worker_loop(
    client: httpx2.AsyncClient, name: str, token: str, received: Received
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    while not received.stop:
        response = await client.post(
            f"/v1/workers/{name}/pull", params={"wait": WAIT}, headers=headers
        )
        if response.status_code == 200:
            job_id = response.json()["id"]
            received.at[job_id] = time.perf_counter()
            received.arrived.set()
            await client.post(
                f"/v1/jobs/{job_id}/finish", json={"outcome": "finished"}, headers=headers
            )
        elif response.status_code != 204:
            print(f"  {name}: pull answered {response.status_code} {response.text[:200]}")
            await asyncio.sleep(1)


async def metric(client: httpx2.AsyncClient, name: str) -> float:
    """The sum of a metric's samples (all label sets) in /metrics."""
    text_ = (await client.get("/metrics")).text
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text_, re.M))


def transactions(database_name: str) -> int:
    engine = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
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
    sent = time.perf_counter()
    response = await client.post(
        "/v1/jobs",
        json={"resources": resources},
        headers={"Authorization": f"Bearer {submitter}"},
    )
    answered = time.perf_counter()
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    while job_id not in received.at:
        received.arrived.clear()
        await asyncio.wait_for(received.arrived.wait(), timeout=30)
    return received.at[job_id] - sent, received.at[job_id] - answered


def report(label: str, latencies: list[tuple[float, float]]) -> None:
    for index, what in ((0, "from the submission sent"), (1, "from its 201")):
        values = sorted(1000 * pair[index] for pair in latencies)
        p50 = statistics.median(values)
        p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
        print(
            f"  {label:<9} {what:<26} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  "
            f"max {values[-1]:7.1f} ms  n={len(values)}  {load()}"
        )


async def idle_cost(
    admin: httpx2.AsyncClient, database_name: str, workers: int, seconds: float, label: str
) -> None:
    """Transactions in the database and pull attempts over ``seconds`` with no job
    submitted, per idle worker per minute."""
    before_pulls = await metric(admin, "jobmatch_dispatch_duration_seconds_count")
    # PostgreSQL flushes a backend's counts up to 10 s after its last transaction
    # (PGSTAT_IDLE_INTERVAL): let the earlier ones and this scrape's arrive first.
    await asyncio.sleep(STATS_SETTLE_SECONDS)
    before_xacts = transactions(database_name)
    await asyncio.sleep(seconds)
    after_xacts = transactions(database_name)
    after_pulls = await metric(admin, "jobmatch_dispatch_duration_seconds_count")
    per_minute = 60 / seconds / workers
    idle_xacts = after_xacts - before_xacts
    pulls = after_pulls - before_pulls
    scraped = seconds + STATS_SETTLE_SECONDS
    print(
        f"  idle, {label}: {idle_xacts} transactions in {seconds:g} s "
        f"({idle_xacts * per_minute:.3f} per idle worker per minute); {pulls:g} pull "
        f"attempts in {scraped:g} s ({pulls * 60 / scraped / workers:.3f} per idle worker "
        f"per minute) {load()}"
    )


async def waiting_count(client: httpx2.AsyncClient) -> float:
    return await metric(client, "jobmatch_longpoll_waiting")


async def until_all_wait(client: httpx2.AsyncClient, count: int) -> None:
    deadline = time.monotonic() + 60
    while await waiting_count(client) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {await waiting_count(client)} of {count} pulls wait")
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # every first attempt is over


async def run(args: argparse.Namespace, port: int, url: str) -> None:
    workers, submitter = args.registered
    received = Received()
    limits = httpx2.Limits(max_connections=args.workers + 20, max_keepalive_connections=None)
    timeout = httpx2.Timeout(WAIT + 30, connect=10)
    base = f"http://127.0.0.1:{port}"
    async with (
        httpx2.AsyncClient(base_url=base, limits=limits, timeout=timeout) as pulls,
        httpx2.AsyncClient(base_url=base, timeout=30) as admin,
    ):
        tasks = [
            asyncio.create_task(worker_loop(pulls, name, token, received))
            for name, token in workers.items()
        ]
        names = list(workers)
        database_name = make_url(url).database or ""
        await until_all_wait(admin, len(names))
        print(f"{len(names)} workers waiting with wait={WAIT} {load()}")
        # While they wait: a window that ends before the first deadline.
        await idle_cost(admin, database_name, len(names), args.idle_seconds, "while waiting")
        # Warm-up: each targeted category once (its misfits are computed at its first
        # submission, which is the submission's cost, not the wake-up's).
        for name in names:
            await submit_and_time(admin, submitter, f"bench: {name}", received)
        await submit_and_time(admin, submitter, "language: java", received)
        if args.steady_seconds > 0:
            # A window longer than the wait: every worker's deadline passes once in it and
            # it pulls again (the price of a bounded wait).
            await idle_cost(
                admin, database_name, len(names), args.steady_seconds, "steady, deadlines too"
            )

        rng = random.Random(22)
        for label, pick in (
            ("targeted", lambda: f"bench: {rng.choice(names)}"),
            ("herd", lambda: "language: java"),
        ):
            await until_all_wait(admin, len(names))
            wakeups_before = await metric(admin, "jobmatch_longpoll_wakeups_total")
            checks_before = await metric(admin, "jobmatch_longpoll_fit_checks_total")
            latencies = []
            for _ in range(args.jobs):
                latencies.append(await submit_and_time(admin, submitter, pick(), received))
                await asyncio.sleep(args.gap)
            wakeups = await metric(admin, "jobmatch_longpoll_wakeups_total") - wakeups_before
            checks = await metric(admin, "jobmatch_longpoll_fit_checks_total") - checks_before
            report(label, latencies)
            print(
                f"  {label:<9} {wakeups / args.jobs:.1f} waiters woken and "
                f"{checks / args.jobs:.2f} fit statements per job {load()}"
            )
        received.stop = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=200, help="jobs per latency series")
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
    parser.add_argument("--processes", type=int, default=1, help="server worker processes")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    os.environ["JOBMATCH_LEASE_SWEEP_SECONDS"] = "0"
    os.environ["JOBMATCH_MAX_CONNECTIONS"] = str(args.workers * 2 + 100)
    print(f"bench/longpoll.py: {args.workers} workers, PostgreSQL, {os.cpu_count()} CPUs {load()}")
    with scratch_database("postgresql", keep=args.keep) as url:
        migrate.upgrade(url)
        args.registered = register(url, args.workers)
        with server(url, args.processes) as (port, _pid):
            asyncio.run(run(args, port, url))


if __name__ == "__main__":
    main()
