"""A parallel environment's slot limit holds when two hosts pull PE jobs at once (issue 8).

Found by bench/load.py on PostgreSQL: the slots a PE lends were counted with a plain
SELECT, so two pulls on different hosts both saw room and together lent 16 of 12 slots.
Here the interleaving is forced: the first pull books and keeps its transaction open while
the second runs; the second must see the first's slots (it waits for the PE row lock on
PostgreSQL, for the write lock on SQLite) and leave its job waiting.
"""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.engine import Database
from app.matching.dispatch import pull as dispatch
from app.matching.invariants import violations
from tests.support.http_api import register, submit

pytestmark = pytest.mark.db


def _waits_for_a_lock(database: Database) -> bool:
    if database.dialect_name != "postgresql":
        return False
    with database.engine.connect() as connection:
        return bool(
            connection.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            )
        )


def test_two_hosts_cannot_overdraw_a_pe_together(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "h1", slots=4)
    register(client, admin_headers, "h2", slots=4)
    pe = client.put(
        "/v1/pes/smp", json={"allocation_rule": "$pe_slots", "slots": 4}, headers=admin_headers
    )
    assert pe.status_code == 200, pe.text
    first = submit(client, admin_headers, pe="smp", pe_slots="3")
    second = submit(client, admin_headers, pe="smp", pe_slots="3")

    second_pull: dict[str, object] = {}
    other = Database(database.url, busy_timeout=30.0)

    def pull_on_h2() -> None:
        try:
            with other.transaction() as session:
                job = dispatch.pull(session, "h2")
                second_pull["job"] = None if job is None else job.id
        except Exception as exc:
            second_pull["job"] = exc

    try:
        with database.transaction() as session:
            job = dispatch.pull(session, "h1")
            assert job is not None and job.id == first["id"] and job.slots == 3
            racer = threading.Thread(target=pull_on_h2)
            racer.start()
            # Let the second pull reach the PE (it blocks there, or at BEGIN on SQLite).
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and not _waits_for_a_lock(database):
                time.sleep(0.02)
            assert "job" not in second_pull, second_pull
        racer.join(timeout=30)
    finally:
        other.dispose()
    assert not racer.is_alive()
    assert second_pull == {"job": None}, "the PE lent 6 of its 4 slots"
    with database.transaction(write=False) as session:
        assert violations(session) == []
    state = client.get(f"/v1/jobs/{second['id']}", headers=admin_headers).json()["state"]
    assert state == "waiting"
