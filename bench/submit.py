"""The server's CPU per single submission, ``POST /v1/jobs`` (issue 38).

Run from the repository root::

    .venv/bin/python bench/submit.py [--submissions 2000] [--clients 8] [--processes 1]

On a scratch PostgreSQL database: eight workers that fit the job (so that it waits), a
submitter's token and the job's category (one submission through ``submit_job``). Then
``jobmatch serve`` (uvicorn, ``--processes`` worker processes) takes ``--submissions``
submissions of ``{"resources": ""}`` from ``--clients`` threads (bench/http_floor.py's
``http.client`` loop), and the script prints jobs/s and the CPU per submission of the
server processes (/proc utime + stime), PostgreSQL's backends of the database and the
client threads, with the load average when it started. Compare with the pull+finish
pair and the ``fastapi+db`` floor of bench/http_floor.py (two requests per "job"). Not
a test; never gates CI.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._measure import processes_cpu, scratch_database
from bench.http_floor import JOBMATCH, JOBMATCH_ENVIRONMENT, MODES, Tally, serve

#: What every worker offers; the job asks for nothing, which every worker fits.
WORKER_TAGS = "language: python"
BODY = json.dumps({"resources": ""})


def prepare(url: str, clients: int) -> str:
    """Migrate, register the workers, create the category; the submitter's token."""
    from app.db import migrate, tokens
    from app.db.engine import Database
    from app.db.models import Role
    from app.matching.submission import JobSpec, submit_job
    from app.matching.workers import WorkerSpec, upsert_worker

    migrate.upgrade(url)
    database = Database(url)
    try:
        with database.transaction() as session:
            for number in range(clients):
                upsert_worker(
                    session, WorkerSpec(name=f"w{number:05d}", resources=WORKER_TAGS, slots=1)
                )
            _row, token = tokens.issue_token(session, role=Role.SUBMITTER, subject="bench")
            submit_job(session, JobSpec(resources=""), submitter="bench")
    finally:
        database.dispose()
    return token


def submitter(port: int, token: str, count: int, tally: Tally) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        for _ in range(count):
            connection.request("POST", "/v1/jobs", body=BODY, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            if response.status != 201:
                raise RuntimeError(f"submission answered {response.status}: {payload[:200]!r}")
            tally.jobs += 1
    except Exception as error:  # reported with the figures, not hidden
        tally.error = repr(error)
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    from sqlalchemy.engine import make_url

    with scratch_database("postgresql", prefix="jobmatch_submit") as url:
        token = prepare(url, args.clients)
        database = make_url(url).database or "postgres"
        target, factory = MODES[JOBMATCH]
        env = {**JOBMATCH_ENVIRONMENT, "JOBMATCH_DATABASE_URL": url}
        load = os.getloadavg()
        with serve(target, factory, args.processes, env) as (port, pgid):
            # A warm-up: the server's connections, prepared statements and caches.
            warm = Tally()
            submitter(port, token, 50, warm)

            def sample() -> tuple[float, float, float]:
                return (
                    processes_cpu(lambda _cmd, fields: fields[2] == str(pgid)),
                    processes_cpu(
                        lambda cmd, _f: cmd.startswith("postgres: ") and f" {database} " in cmd
                    ),
                    time.process_time(),
                )

            tallies = [Tally() for _ in range(args.clients)]
            share = args.submissions // args.clients
            before = sample()
            started = time.perf_counter()
            threads = [
                threading.Thread(target=submitter, args=(port, token, share, tally))
                for tally in tallies
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
    print(
        f"submit {jobs} jobs, {args.clients} clients, {args.processes} process(es):"
        f" {jobs / elapsed:6.0f} jobs/s   CPU per job: server {server * per:5.2f} ms,"
        f" PostgreSQL {postgres * per:5.2f} ms, clients {own * per:5.2f} ms"
        f"   load {load[0]:.1f}/{load[1]:.1f}"
    )
    for tally in [warm, *tallies]:
        if tally.error:
            print(f"  a client stopped: {tally.error}")
            break


if __name__ == "__main__":
    main()
