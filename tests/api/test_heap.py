"""The serving process sets its start-up heap aside from the garbage collector (app.heap):
full collections walked about 190,000 long-lived objects, some 90 ms each, in the middle
of whichever request was running (bench/allocation.py, issue 9). And it sets its later
survivors aside once they are a second old: with thousands of waiting pulls, CPython's
generations walked every waiting pull every few seconds (310-810 ms at 5,000 per process in
bench/longpoll.py, issue 37)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import heap
from app.api import app as app_module
from app.api.app import create_app
from app.db.engine import Database
from app.settings import Settings, get_settings
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def test_settle_collects_then_freezes() -> None:
    """Garbage in a cycle is collected, and what survives is frozen. The test process's
    heap is frozen already (tests/conftest.py): thawing it for this test made its
    settling walk the whole process (2.35 s in the collector) and left it thawed."""

    class Cycle:
        me: object

        def __init__(self) -> None:
            self.me = self

    garbage = weakref.ref(Cycle())  # in a cycle: settle collects it rather than freeze it
    survivor = Cycle()
    before = gc.get_freeze_count()
    heap.settle()
    assert gc.get_freeze_count() > before
    assert garbage() is None
    assert survivor.me is survivor


def test_the_served_app_is_built_then_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBMATCH_DATABASE_URL", f"sqlite:///{tmp_path / 'heap.db'}")
    get_settings.cache_clear()
    settled: list[str] = []
    monkeypatch.setattr(heap, "settle", lambda: settled.append("settle"))
    monkeypatch.setattr(heap, "keep_settled", lambda: settled.append("kept"))
    try:
        app = app_module.create_app_from_environment()
    finally:
        get_settings.cache_clear()
    assert settled == ["settle", "kept"]
    app.state.database.dispose()


@pytest.mark.db
def test_an_app_that_served_and_stopped_is_freed(settings: Settings, database: Database) -> None:
    """Nothing process-wide keeps an app once it has stopped. FastAPI caches, per kind, the
    4,096 last endpoints it classified; /docs was a closure over its app, and the test
    suite kept every app it built (their middleware, SQLite handles and heaps: 329 open
    handles and 4.8 GB by the end of a run, and a full collection then took seconds)."""
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/docs").status_code == 200
        assert client.get("/v1/workers", headers=ADMIN).status_code == 200
    freed = weakref.ref(app)
    del app, client
    gc.collect()
    assert freed() is None


MB = 1024 * 1024


def test_a_full_collection_is_due_on_memory_growth_or_after_the_longest_interval() -> None:
    """Double what it was after the last one, and at least 32 MB more; else after an hour."""
    rule = heap.FullCollections(baseline=100 * MB, since=0.0)
    assert not rule.due(199 * MB, now=60.0)
    assert rule.due(200 * MB, now=60.0)
    small = heap.FullCollections(baseline=10 * MB, since=0.0)
    assert not small.due(10 * MB + heap.GROWTH_FLOOR_BYTES - 1, now=60.0)  # doubled, but
    assert small.due(10 * MB + heap.GROWTH_FLOOR_BYTES, now=60.0)  # 32 MB is the least
    big = heap.FullCollections(baseline=1000 * MB, since=0.0)
    assert not big.due(1999 * MB, now=60.0)  # 32 MB is not enough: it has to double
    assert big.due(2000 * MB, now=60.0)
    assert not big.due(1000 * MB, now=heap.MAX_INTERVAL_SECONDS - 1)
    assert big.due(1000 * MB, now=heap.MAX_INTERVAL_SECONDS)
    assert big.due(900 * MB, now=heap.MAX_INTERVAL_SECONDS)  # shrunk, but an hour passed


def test_a_check_collects_when_due_and_counts_from_there() -> None:
    resident = [100 * MB]
    clock = [0.0]
    collected: list[float] = []
    rule = heap.FullCollections(
        resident=lambda: resident[0],
        clock=lambda: clock[0],
        collect=lambda: collected.append(clock[0]),
    )
    rule.rebase()
    clock[0] = 10.0
    resident[0] = 120 * MB
    assert not rule.check()
    resident[0] = 200 * MB
    assert rule.check()
    assert collected == [10.0]
    assert (rule.baseline, rule.since) == (200 * MB, 10.0)
    clock[0] = 20.0
    assert not rule.check()  # the growth counts from the collection, not from the start
    assert collected == [10.0]


def test_a_settled_heap_settles_each_tick_and_collects_in_full_when_due() -> None:
    """Each tick either settles the young objects or, when the rule says so, collects
    the whole heap instead (the full collection settles too)."""
    ticks: list[str] = []
    due = threading.Event()
    done = threading.Event()

    class WhenTold(heap.FullCollections):
        def due(self, resident: int, now: float) -> bool:
            return due.is_set()

    def full() -> None:
        ticks.append("full")
        done.set()

    def young() -> None:
        ticks.append("young")
        if len(ticks) == 3:
            due.set()

    settled = heap.SettledHeap(WhenTold(collect=full), tick=0.01, settle_young=young)
    settled.start()
    try:
        assert done.wait(5)
    finally:
        settled.stop()
    assert ticks[:4] == ["young", "young", "young", "full"]


#: Run in a process of its own: thawing this one's heap would walk all of it.
THAWED_CYCLES = """
import gc, time, weakref
from app import heap

class Cycle:
    def __init__(self):
        self.me = self

heap.settle()
settled = heap.keep_settled()
kept = Cycle()
dropped_young = weakref.ref(Cycle())
time.sleep(0.3 + 2 * heap.TICK_SECONDS)
assert dropped_young() is None, "a cycle dropped young is collected at the tick"
frozen = gc.get_freeze_count()
assert frozen > 0
old = Cycle()
time.sleep(2 * heap.TICK_SECONDS)
assert gc.get_freeze_count() > frozen, "a survivor is frozen at the next tick"
dropped_old = weakref.ref(old)
del old
gc.collect()
assert dropped_old() is not None, "a frozen cycle waits for a full collection"
heap.collect_in_full()
assert dropped_old() is None
assert kept.me is kept
print("ok")
"""


def test_a_serving_heap_freezes_survivors_and_a_full_collection_frees_their_cycles() -> None:
    done = subprocess.run(
        [sys.executable, "-c", THAWED_CYCLES], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
