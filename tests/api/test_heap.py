"""The serving process sets its start-up heap aside from the garbage collector (app.heap):
full collections walked about 190,000 long-lived objects, some 90 ms each, in the middle
of whichever request was running (bench/allocation.py, issue 9)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
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


@pytest.fixture
def thawed() -> Iterator[None]:
    # Freezing is process-wide: leave the test process as it was.
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_collects_then_freezes(thawed: None) -> None:
    class Cycle:
        me: object

        def __init__(self) -> None:
            self.me = self

    garbage = weakref.ref(Cycle())  # in a cycle: settle collects it rather than freeze it
    before = gc.get_freeze_count()
    heap.settle()
    assert before == 0
    assert gc.get_freeze_count() > 0
    assert garbage() is None


def test_the_served_app_is_built_then_settled(
    thawed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
