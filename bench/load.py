"""Concurrency under load (issue 8): `jobmatch serve --workers 4` on a loopback port, a
Grid Engine cluster of one worker per client (a global licence pool, per-host memory, a
parallel environment), 20,000 jobs of a mix (plain, with consumable requests, parallel with
-pe, a few that fit nowhere), then 32 client processes each acting as a worker, pulling and
finishing over HTTP until the queue is empty (bounded in time).

Afterwards: the invariant checker (also run on snapshots during the load), no job
dispatched twice (what clients received and the job_events log), no job lost, everything
given back, no 5xx seen by any client. Prints jobs processed, errors seen by status and the
pull latency p50/p99.

Run from the repository root:

    python bench/load.py                       # PostgreSQL, 20,000 jobs, 32 processes
    python bench/load.py --jobs 5000           # a smaller run
    python bench/load.py --backend sqlite --clients 8 --mode threads

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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--mode", choices=("processes", "threads"), default="processes")
    parser.add_argument("--server-workers", type=int, default=4)
    parser.add_argument("--run-seconds", type=float, default=1800.0)
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    if args.backend == "postgresql":
        url = os.environ.get("JOBMATCH_BENCH_POSTGRES_URL") or os.environ.get(
            "JOBMATCH_TEST_POSTGRES_URL"
        )
        if not url:
            parser.error("set JOBMATCH_BENCH_POSTGRES_URL for --backend postgresql")
        os.environ["JOBMATCH_TEST_POSTGRES_URL"] = url
    config = LoadConfig(
        jobs=args.jobs,
        clients=args.clients,
        mode=args.mode,
        server_workers=args.server_workers,
        run_seconds=args.run_seconds,
        seed=args.seed,
        submitters=args.submitters,
    )
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_database(args.backend, Path(directory)) as url,
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
        print(f"backend: {args.backend}")
        print(summary(result, numbers))
        print("invariant checks: passed (no double dispatch, no lost job, no overbooking, no 5xx)")


if __name__ == "__main__":
    main()
