"""Concurrency under load (issues 8 and 25): `jobmatch serve --workers K` on a loopback port,
a Grid Engine cluster of one worker per client (a global licence pool, per-host memory, a
parallel environment), a mix of jobs (plain, with consumable requests, parallel with -pe, a
few that fit nowhere), then N client processes each acting as a worker, pulling and
finishing over HTTP until the queue is empty (bounded in time). By default the load runs
twice, on a fresh database each: with pulls that answer at once (a client with nothing to
do sleeps 20-100 ms) and with long-poll pulls (`?wait=`).

Afterwards, for each run: the invariant checker (also run on snapshots during the load),
no job dispatched twice (what clients received and the job_events log), no job lost,
everything given back, no 5xx seen by any client. Prints jobs and pulls per second and the
pull latency p50/p99, with the load average beside them.

Run from the repository root:

    python bench/load.py                       # PostgreSQL, 1,000 jobs, 8 processes
    python bench/load.py --jobs 20000 --clients 32 --server-workers 4   # the issue's size
    python bench/load.py --long-poll on        # only the long-poll run
    python bench/load.py --backend sqlite --clients 8 --mode threads --server-workers 1

PostgreSQL uses JOBMATCH_BENCH_POSTGRES_URL or JOBMATCH_TEST_POSTGRES_URL and works in a
database of its own that it drops afterwards. Not a test: it never gates CI (the small
version is tests/reliability/test_load_invariants.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db import migrate
from app.db.engine import Database
from tests.databases import fresh_database
from tests.reliability.load_harness import LoadConfig, run_load, summary, verify


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--jobs", type=int, default=1_000, help="jobs submitted (default 1000)")
    parser.add_argument("--clients", type=int, default=8, help="client workers (default 8)")
    parser.add_argument("--mode", choices=("processes", "threads"), default="processes")
    parser.add_argument(
        "--server-workers", type=int, default=2, help="processes of jobmatch serve (default 2)"
    )
    parser.add_argument("--run-seconds", type=float, default=600.0)
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument(
        "--long-poll",
        choices=("off", "on", "both"),
        default="both",
        help="pulls that answer at once, long-poll pulls, or a run of each (default)",
    )
    parser.add_argument(
        "--wait", type=float, default=5.0, help="a long-poll pull's wait in seconds (default 5)"
    )
    args = parser.parse_args()
    if args.backend == "postgresql":
        url = os.environ.get("JOBMATCH_BENCH_POSTGRES_URL") or os.environ.get(
            "JOBMATCH_TEST_POSTGRES_URL"
        )
        if not url:
            parser.error("set JOBMATCH_BENCH_POSTGRES_URL for --backend postgresql")
        os.environ["JOBMATCH_TEST_POSTGRES_URL"] = url
    waits = {"off": [0.0], "on": [args.wait], "both": [0.0, args.wait]}[args.long_poll]
    print(f"backend: {args.backend}")
    for wait in waits:
        config = LoadConfig(
            jobs=args.jobs,
            clients=args.clients,
            mode=args.mode,
            server_workers=args.server_workers,
            run_seconds=args.run_seconds,
            seed=args.seed,
            submitters=args.submitters,
            long_poll_seconds=wait,
        )
        run_once(args.backend, config)


def run_once(backend: str, config: LoadConfig) -> None:
    """One load on a fresh database; its figures, or the failed invariant and exit 1."""
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_database(backend, Path(directory)) as url,
    ):
        migrate.upgrade(url)
        log = Path(directory) / "server.log"
        result = run_load(url, config, log)
        database = Database(url)
        try:
            try:
                numbers = verify(database, result)
            except AssertionError as exc:
                print(f"INVARIANT CHECK FAILED: {exc}")
                print(log.read_text()[-4000:])
                raise SystemExit(1) from exc
        finally:
            database.dispose()
        print()
        print(summary(result, numbers))
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("invariant checks: passed (no double dispatch, no lost job, no overbooking, no 5xx)")


if __name__ == "__main__":
    main()
