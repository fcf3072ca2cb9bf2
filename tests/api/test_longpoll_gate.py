"""A waiting pull's attempts at the process's gate (issue 37), without a database: the
hub and ``pull_or_wait`` with a scripted attempt."""

from __future__ import annotations

import asyncio

import pytest

from app.api.longpoll import LongPoll, PullOutcome, attempts_within_pool, pull_or_wait
from app.db.connections import ConnectionOptions
from app.db.engine import Database
from app.matching.wakeups import WakeupHub


def _nothing() -> PullOutcome[str]:
    return PullOutcome(job=None, category_id=None, refresh=False, worker_id=7, could_take_work=True)


def test_news_while_a_first_attempt_queues_costs_no_second_attempt() -> None:
    """A pull whose first attempt waits for a turn does not know its worker yet, so any
    announcement wakes it; the attempt that then runs reads what the news was about, so it
    is the only one. Armed before it queued, the pull attempted again at once: at 10,000
    workers every submission sent the queued first attempts round twice."""
    hub = WakeupHub(lambda category, workers: set(), max_attempts=1)
    attempts: list[str] = []

    def attempt() -> PullOutcome[str]:
        attempts.append("attempt")
        return _nothing()

    async def scenario() -> int:
        release = asyncio.Event()

        async def holder() -> None:
            async with hub.any_attempt():
                await release.wait()

        held = asyncio.create_task(holder())
        await asyncio.sleep(0)
        pull = asyncio.create_task(pull_or_wait(hub, attempt, 0.5, worker="w1"))
        await asyncio.sleep(0.05)
        assert attempts == []  # queued behind the holder
        hub.deliver("c5")  # news about a category: a waiter of unknown worker is woken
        await asyncio.sleep(0.05)
        release.set()
        await held
        outcome = await pull
        assert outcome.job is None
        return len(attempts)

    assert asyncio.run(scenario()) == 1


def test_news_during_an_attempt_brings_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """What happens while the attempt reads may be after its snapshot: the pull looks
    again (the rule the early arming kept, and the late one keeps)."""
    hub = WakeupHub(lambda category, workers: {7})
    calls = 0

    def attempt() -> PullOutcome[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            hub.deliver("c5")  # from the attempt's thread, as a commit elsewhere would
        return _nothing()

    async def scenario() -> int:
        await pull_or_wait(hub, attempt, 0.3, worker="w1")
        return calls

    assert asyncio.run(scenario()) >= 2


@pytest.mark.parametrize(("pool_size", "attempts"), [(10, 8), (4, 2), (2, 1), (40, 16)])
def test_attempts_at_once_stay_within_the_connections_the_pool_keeps(
    pool_size: int, attempts: int
) -> None:
    """Attempts beyond the pool's kept connections each opened an overflow connection that
    the pool closed on its return: PostgreSQL forked a session for most attempts of a
    10,000-worker farm (bench/longpoll.py). The gate leaves the pool two connections for
    the other requests, and never exceeds MAX_CONCURRENT_ATTEMPTS."""
    database = Database(
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
        options=ConnectionOptions(pool_size=pool_size),
    )
    try:
        assert attempts_within_pool(database) == attempts
        assert LongPoll(database).hub.max_attempts == attempts
    finally:
        database.dispose()
