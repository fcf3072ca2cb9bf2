"""A database whose schema is not at the migration head (issue 35): every endpoint but the
probes answers 503 problem+json naming the current and head revisions and `jobmatch db
upgrade`, with no traceback in the log; `serve` logs the same at start; once the schema is
upgraded (by another process) the server answers normally without a restart, and stops
checking."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient

from app.api import schema_gate
from app.api.app import create_app
from app.api.lease_sweeper import LeaseSweeper
from app.db import migrate
from app.db.engine import Database
from app.db.schema_state import SchemaState
from app.settings import Settings
from tests.databases import fresh_database
from tests.live_server import LiveServer
from tests.support.http_api import assert_problem

ADMIN = "schema-gate-admin"
UPGRADE = "`jobmatch db upgrade`"


def _head_and_previous() -> tuple[str, str]:
    config = Config()
    config.set_main_option("script_location", str(migrate.migrations_dir()))
    script = ScriptDirectory.from_config(config)
    (head,) = script.get_heads()
    previous = script.get_revision(head).down_revision
    assert isinstance(previous, str)
    return head, previous


HEAD, PREVIOUS = _head_and_previous()


@pytest.fixture(params=["empty", "behind"])
def stale_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[str]:
    """A database never migrated, or one migrated to the revision before the head."""
    with fresh_database(backend, tmp_path) as url:
        if request.param == "behind":
            migrate.upgrade(url, PREVIOUS)
        yield url


def _current(url: str) -> list[str]:
    return sorted(migrate.current_revisions_at(url))


def _assert_schema_problem(response, current: list[str]) -> None:  # type: ignore[no-untyped-def]
    body = assert_problem(response, 503)
    assert body["current_revisions"] == current
    assert body["head_revisions"] == [HEAD]
    assert UPGRADE in body["detail"] and HEAD in body["detail"]
    assert (PREVIOUS in body["detail"]) is (current == [PREVIOUS])
    assert response.headers["retry-after"]


def _poll(client: TestClient, path: str, headers: dict[str, str], seconds: float = 10.0) -> int:
    """The status of ``path`` once it is not 503, or 503 after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        status = client.get(path, headers=headers).status_code
        if status != 503 or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def test_a_schema_not_at_head_is_a_503_naming_the_revisions_until_it_is_upgraded(
    stale_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = _current(stale_url)
    checks: list[SchemaState] = []
    read = schema_gate.read_schema_state

    def counted(engine):  # type: ignore[no-untyped-def]
        checks.append(read(engine))
        return checks[-1]

    monkeypatch.setattr(schema_gate, "read_schema_state", counted)
    caplog.set_level(logging.INFO)
    database = Database(stale_url)
    settings = Settings(database_url=stale_url, admin_token=ADMIN, log_format="text")
    admin = {"Authorization": f"Bearer {ADMIN}"}
    app = create_app(settings, database=database)
    # create_app sets the process's log handlers: pytest's capture goes back among them.
    logging.getLogger().addHandler(caplog.handler)
    try:
        with TestClient(app) as client:
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any(UPGRADE in w and HEAD in w for w in warnings), warnings
            started = time.monotonic()
            # An admin's read, a write with a body, and a worker token that would be looked
            # up in a table of the schema: all answered by the gate.
            _assert_schema_problem(client.get("/v1/workers", headers=admin), current)
            _assert_schema_problem(
                client.post("/v1/jobs", json={"resources": ""}, headers=admin), current
            )
            _assert_schema_problem(
                client.post("/v1/workers/w1/pull", headers={"Authorization": "Bearer jm_x"}),
                current,
            )
            _assert_schema_problem(client.get("/v1/no/such/route", headers=admin), current)
            # The probes answer for themselves.
            assert client.get("/healthz").status_code == 200
            ready = assert_problem(client.get("/readyz"), 503)
            assert UPGRADE in ready["detail"]
            # Cheap: one check at the start, then at most one per interval.
            elapsed = time.monotonic() - started
            assert len(checks) <= 2 + int(elapsed / schema_gate.RECHECK_SECONDS)

            migrate.upgrade(stale_url)  # as another process or an operator would
            assert _poll(client, "/v1/workers", admin) == 200
            assert client.post("/v1/jobs", json={"resources": ""}, headers=admin).status_code == 201
            # At head: no more checks, however many requests come.
            seen = len(checks)
            for _ in range(5):
                assert client.get("/v1/workers", headers=admin).status_code == 200
            assert len(checks) == seen and checks[-1].at_head
    finally:
        database.dispose()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_database_migrated_by_a_newer_jobmatch_is_named_as_such(
    backend: str, tmp_path: Path
) -> None:
    """A revision this jobmatch does not know: upgrading cannot help; the answer says so."""
    with fresh_database(backend, tmp_path) as url:
        migrate.upgrade(url)
        database = Database(url)
        try:
            with database.engine.begin() as connection:
                connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
            settings = Settings(database_url=url, admin_token=ADMIN, log_format="text")
            with TestClient(create_app(settings, database=database)) as client:
                response = client.get("/v1/workers", headers={"Authorization": f"Bearer {ADMIN}"})
                body = assert_problem(response, 503)
                assert body["current_revisions"] == ["9999"]
                assert "does not know" in body["detail"]
                assert f"jobmatch db downgrade {HEAD}" in body["detail"]
        finally:
            database.dispose()


def test_serve_logs_a_schema_not_at_head_at_start_and_serves_after_db_upgrade(
    stale_url: str, tmp_path: Path
) -> None:
    """`jobmatch serve` on the stale database starts (a warning, not a crash), answers 503,
    and answers normally once `jobmatch db upgrade` ran in another process."""
    current = _current(stale_url)
    log = tmp_path / "server.log"
    server = LiveServer(stale_url, log)
    server.start()
    try:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line[:1] == "{"]
        said = [line["message"] for line in lines if line["level"] == "WARNING"]
        assert any(UPGRADE in message and HEAD in message for message in said), lines
        status, body = server.request("GET", "/v1/workers")
        assert status == 503 and body["current_revisions"] == current, body
        assert body["head_revisions"] == [HEAD] and UPGRADE in body["detail"]

        upgrade = subprocess.run(
            [sys.executable, "-m", "app.cli", "db", "upgrade"],
            env={**os.environ, "JOBMATCH_DATABASE_URL": stale_url},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        deadline = time.monotonic() + 15
        while (status := server.request("GET", "/v1/workers")[0]) == 503:
            assert time.monotonic() < deadline, "still 503 after the upgrade"
            time.sleep(0.2)
        assert status == 200
        assert server.request("GET", "/readyz")[0] == 200
    finally:
        server.stop()
    assert "Traceback" not in log.read_text()


def test_the_lease_sweep_waits_for_the_schema(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A sweep on a database without the schema's tables would fail (a traceback per sweep);
    the sweeper of an app whose schema is not at head skips it, and sweeps once it is."""
    caplog.set_level(logging.INFO)
    with fresh_database(backend, tmp_path) as url:
        database = Database(url)
        try:
            settings = Settings(database_url=url, lease_seconds=0.01, lease_sweep_seconds=0.05)
            watch = schema_gate.SchemaWatch(database, recheck_seconds=0.05)
            sweeps: list[int] = []
            sweeper = LeaseSweeper(database, settings, ready=watch.ready)
            original = sweeper.sweep

            def counted() -> int:
                sweeps.append(original())
                return sweeps[-1]

            sweeper.sweep = counted  # type: ignore[method-assign]
            sweeper.start()
            time.sleep(0.5)
            assert sweeps == [] and not watch.at_head
            migrate.upgrade(url)
            deadline = time.monotonic() + 10
            while not sweeps:
                assert time.monotonic() < deadline, "no sweep after the upgrade"
                time.sleep(0.05)
            sweeper.stop()
        finally:
            database.dispose()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
