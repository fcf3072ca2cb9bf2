"""The serving process sets its start-up heap aside from the garbage collector (app.heap):
full collections walked about 190,000 long-lived objects, some 90 ms each, in the middle
of whichever request was running (bench/allocation.py, issue 9)."""

from __future__ import annotations

import gc
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
    settled: list[int] = []
    monkeypatch.setattr(heap, "settle", lambda: settled.append(1))
    try:
        app = app_module.create_app_from_environment()
    finally:
        get_settings.cache_clear()
    assert settled == [1]
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
