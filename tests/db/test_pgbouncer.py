"""jobmatch behind a real PgBouncer in transaction pooling (issue 25).

PgBouncer (Debian's ``pgbouncer``) is started on a free loopback port in front of the test
PostgreSQL server, ``pool_mode = transaction``. What transaction pooling takes away, and
what the engine does instead (app/db/connections.py), each from PgBouncer's documentation
(pgbouncer.org, "config.md" and "features.md", "SQL feature map for pooling modes"):

* startup parameters it does not track are refused ("unsupported startup parameter",
  ``ignore_startup_parameters``): ``options=-c jit=off`` cannot be sent at connect;
* protocol-level prepared statements need PgBouncer 1.21 (``max_prepared_statements``);
  Debian 12 ships 1.18, so psycopg must not prepare (``prepare_threshold=None``);
* ``LISTEN`` is not supported in transaction mode: the listening connections go to a
  direct URL, or the process does not listen and waiting pulls poll.

The suite's dispatch and concurrency cases then run again, as they are, through the pooler
(a pytest of their own with the pooler's URL as the PostgreSQL server and
``JOBMATCH_DB_POOLER=pgbouncer``), and PgBouncer's own counters show the traffic went
through it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app.db.connections import ConnectionOptions
from app.db.engine import Database
from app.settings import Settings
from tests.databases import (
    DIRECT_SERVER_ENV,
    POSTGRES_ENV,
    fresh_database,
    migrated_database,
    postgres_server_url,
    run_directory,
)
from tests.support import pgbouncer

pytestmark = [
    # Its pytest of the dispatch and concurrency cases brings concurrency of its own.
    pytest.mark.serial,
    pytest.mark.skipif(
        pgbouncer.EXECUTABLE is None,
        reason="pgbouncer is not installed (apt-get install pgbouncer; CI installs it)",
    ),
    pytest.mark.skipif(postgres_server_url() is None, reason=f"{POSTGRES_ENV} is not set"),
]

POOLED = ConnectionOptions(behind_pooler=True)

#: The cases run again through the pooler: dispatch (pulls, finishes, lock order, generic
#: plans), concurrent pulls, finishes and scheduler placements on inventories, concurrent
#: bookings of quotas, and the HTTP load with several server processes. (The inventory case
#: once deadlocked now and then through the pooler: a finish locked its reporting worker
#: before the job's other workers; tests/matching/dispatch/test_lock_order.py pins the fix.)
SUITE_CASES = (
    "tests/matching/dispatch",
    "tests/matching/allocation/test_concurrency.py",
    "tests/matching/gridengine/test_quota_concurrency.py",
    "tests/reliability/test_load_invariants.py",
)


@pytest.fixture(scope="module")
def pooler_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    server = postgres_server_url()
    assert server is not None
    with pgbouncer.running_pgbouncer(server, tmp_path_factory.mktemp("pgbouncer")) as port:
        yield port


@pytest.fixture(scope="module")
def direct_url(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[str]:
    """A migrated database of its own, by its direct URL."""
    directory = tmp_path_factory.mktemp("pg")
    with migrated_database("postgresql", directory, run_directory(pytestconfig)) as url:
        yield url


@pytest.fixture(scope="module")
def pooled_url(direct_url: str, pooler_port: int) -> str:
    return pgbouncer.pooled_url(direct_url, pooler_port)


def test_the_jit_connect_option_is_refused_by_the_pooler(pooled_url: str) -> None:
    """Why the engine must not send ``options`` behind a pooler (PgBouncer config.md,
    ignore_startup_parameters)."""
    database = Database(pooled_url, options=ConnectionOptions())
    try:
        with pytest.raises(OperationalError, match="unsupported startup parameter"):
            database.ping()
    finally:
        database.dispose()


def statements_of_three_transactions(url: str) -> list[str]:
    """The statements three transactions behind the pooler sent, each asking ``SHOW jit``
    (and finding it off)."""
    database = Database(url, options=POOLED)
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        for _ in range(3):
            with database.transaction(write=False) as session:
                assert session.execute(text("SHOW jit")).scalar() == "off"
    finally:
        database.dispose()
    return statements


def test_behind_the_pooler_jit_is_off_in_every_transaction(pooled_url: str) -> None:
    assert statements_of_three_transactions(pooled_url) == ["SET LOCAL jit = off", "SHOW jit"] * 3


def test_a_database_with_jit_off_needs_no_statement_per_transaction(
    pooler_port: int, tmp_path: Path
) -> None:
    """``ALTER DATABASE ... SET jit = off`` (docs/operations.md): each connection looks it
    up once, and its transactions then send no SET LOCAL. A database of its own, so that
    PgBouncer holds no server connection opened before the setting."""
    with fresh_database("postgresql", tmp_path) as direct:
        name = make_url(direct).database
        setup = Database(direct)
        with setup.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET jit = off')
        setup.dispose()
        pooled = pgbouncer.pooled_url(direct, pooler_port)
        assert statements_of_three_transactions(pooled) == ["SHOW jit"] * 3


def test_statements_run_many_times_over_many_connections_without_preparing(
    pooled_url: str,
) -> None:
    """psycopg prepares a statement after its fifth run on a connection; behind the pooler
    it never does, so transactions landing on any server connection all succeed."""
    database = Database(pooled_url, options=POOLED)
    try:
        with database.transaction(write=False) as held:
            # Two client connections, so that PgBouncer spreads their transactions.
            for _ in range(12):
                held.execute(text("SELECT count(*) FROM workers")).scalar()
                with database.transaction(write=False) as session:
                    assert session.execute(text("SELECT count(*) FROM jobs")).scalar() == 0
        raw = database.engine.raw_connection()
        try:
            assert raw.driver_connection.prepare_threshold is None  # type: ignore[union-attr]
        finally:
            raw.close()
    finally:
        database.dispose()


def _long_poll_app_settings(pooled_url: str, listen_url: str | None) -> Settings:
    return Settings(
        database_url=pooled_url,
        database_listen_url=listen_url,
        db_pooler="pgbouncer",
        admin_token=SecretStr("pgbouncer-admin"),
        log_format="text",
        log_level="WARNING",
    )


@pytest.mark.parametrize("listens", [True, False], ids=["listen-url", "polling"])
def test_a_waiting_pull_gets_a_job_submitted_through_the_pooler(
    direct_url: str, pooled_url: str, listens: bool
) -> None:
    """With a direct listen URL the waiting pull is woken by NOTIFY; without one the
    process does not listen and the waiting pull looks again every second."""
    from fastapi.testclient import TestClient

    from app.api.app import create_app

    settings = _long_poll_app_settings(pooled_url, direct_url if listens else None)
    app = create_app(settings)
    admin = {"Authorization": "Bearer pgbouncer-admin"}
    name = f"pgb-{'l' if listens else 'p'}"
    with TestClient(app, raise_server_exceptions=False) as client:
        assert (app.state.longpoll._listener is not None) is listens
        assert app.state.longpoll.hub.poll_seconds == (None if listens else 1.0)
        reply = client.post(
            "/v1/workers", headers=admin, json={"name": name, "resources": "language: ?python"}
        )
        assert reply.status_code == 201, reply.text
        worker = {"Authorization": f"Bearer {reply.json()['token']}"}

        with ThreadPoolExecutor(max_workers=1) as pool:
            pull = pool.submit(client.post, f"/v1/workers/{name}/pull?wait=10", headers=worker)
            time.sleep(0.5)
            job = {"resources": "language: python"}
            submitted = client.post("/v1/jobs", headers=admin, json=job)
            assert submitted.status_code == 201, submitted.text
            status = pull.result().status_code
        counts = app.state.longpoll.hub.counts
    assert status == 200
    # Woken by the submission's NOTIFY, heard on the direct connection; or found by a
    # look of its own, with nothing heard.
    assert (counts.announcements > 0 and counts.wakeups > 0) is listens
    assert counts.announcements == 0 or listens


def test_dispatch_and_concurrency_cases_pass_through_the_pooler(pooler_port: int) -> None:
    server = postgres_server_url()
    assert server is not None
    before = _transactions_through(server, pooler_port)
    _run_through_the_pooler(pooler_port, *SUITE_CASES)
    # The cases really ran through PgBouncer: its count of pooled transactions grew.
    assert _transactions_through(server, pooler_port) > before + 1000


def _run_through_the_pooler(port: int, *cases: str) -> None:
    """Run the cases' PostgreSQL runs in a pytest of their own, with the pooler's URL as
    the test server and the process told it is behind a pooler (and cannot listen)."""
    server = postgres_server_url()
    assert server is not None
    environment = {
        # Not a worker of this run's pytest-xdist: a run of its own.
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
        POSTGRES_ENV: pgbouncer.pooled_url(server, port),
        "JOBMATCH_DB_POOLER": "pgbouncer",
        "JOBMATCH_DATABASE_LISTEN_URL": "",
        # The tests' own listeners connect to the server directly (announcements.py).
        DIRECT_SERVER_ENV: server,
    }
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    result = subprocess.run(
        # The tests that pulls settle on generic plans need psycopg's prepared statements,
        # off behind it; the express lane's event loop way is not used behind it (the
        # express batch, test_express_batch.py, and the plans its connections cache,
        # test_express_plans.py, are all the event loop's way).
        [
            *command,
            "-k",
            "not sqlite and not settles_on_a_generic_plan and not event_loops_way"
            " and not test_express_batch and not test_express_plans",
            *cases,
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert " passed" in result.stdout and " skipped" not in result.stdout, report


def _transactions_through(server: str, port: int) -> int:
    rows = pgbouncer.admin_show(server, port, "STATS")
    return sum(int(str(row["total_xact_count"])) for row in rows if row["database"] != "pgbouncer")
