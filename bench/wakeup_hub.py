"""The wake-up hub's cost per announcement at farm scale (issue 37), without a server.

Run from the repository root::

    .venv/bin/python bench/wakeup_hub.py [--waiters 10000] [--rounds 50]

``--waiters`` waiters of as many workers wait in one hub (app/matching/wakeups.py), their
workers known. The hub's fit question is answered at once (every worker fits category 1,
the lowest id alone fits category 2), so what is timed is the hub's own work, under its
lock, per announcement: a herd submission (``c1``), a targeted one (``c2``), a taken job
(``t1``), a freed room (``r5``) and the three together as a finish's commit sends them.
Each figure is the mean over ``--rounds`` deliveries, in milliseconds, with the load
average beside it. Not a test; never gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.matching.wakeups import WakeupHub

ANNOUNCEMENTS = {
    "c1": "herd submission: every waiter's worker fits",
    "c2": "targeted submission: one worker fits",
    "t1": "a pull took a job",
    "r5": "a worker's room changed (a finish)",
    "c2 t2 r7": "the three in one commit",
}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"(load {one:.2f}/{five:.2f})"


def fits(category_id: int, worker_ids: frozenset[int]) -> set[int]:
    return set(worker_ids) if category_id == 1 else {min(worker_ids)}


async def measure(waiters: int, rounds: int) -> None:
    loop = asyncio.get_running_loop()
    hub = WakeupHub(fits)
    for index in range(waiters):
        waiter = hub.register(loop, f"w{index}")
        waiter.expect(index, wants_work=True)
    print(f"{waiters} waiters, {rounds} deliveries each {load()}")
    for payload, what in ANNOUNCEMENTS.items():
        hub.deliver(payload)  # the first asks the fit question; the rest use the cache
        started = time.perf_counter()
        for _ in range(rounds):
            hub.deliver(payload)
        mean = (time.perf_counter() - started) / rounds * 1000
        print(f"  {payload:<10} {mean:8.3f} ms  {what} {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(measure(args.waiters, args.rounds))


if __name__ == "__main__":
    main()
