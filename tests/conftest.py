"""Fixtures shared by every test that touches the database.

Database tests run once per backend: always on SQLite, and on PostgreSQL when
JOBMATCH_TEST_POSTGRES_URL is set. Each backend gets one database per test process (`make
test` runs several with pytest-xdist), a copy of one built by the migrations once per run
(never create_all); each test starts from empty tables.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app import heap
from app.api.app import create_app
from app.db.base import Base
from app.db.engine import Database
from app.settings import Settings
from tests.databases import (
    BACKENDS,
    drop_templates,
    migrated_database,
    postgres_server_url,
    run_directory,
)
from tests.live_server import LiveServer
from tests.support.table_digest import empty_tables
from tests.support.thoroughness import register_profiles

#: Inert unless asked (--suite-profile=FILE): where the suite's time goes.
pytest_plugins = ["tests.support.suite_profile"]

ADMIN_TOKEN = "test-admin-token"

register_profiles()


#: What runs first: the tests that mostly wait on other processes (servers, agents, the
#: CLI, pip, a browser), the longest of them first. pytest-xdist hands tests out in this
#: order, so no long test starts last, and the CPU-bound tests fill the time they wait.
RUN_FIRST = (
    "tests/test_readme.py",
    "tests/api/test_fuzz.py",
    "tests/test_distribution.py",
    "tests/hostile/test_extreme_numbers.py",
    "tests/test_benches.py",
    "tests/reliability/",
    "tests/hostile/",
    "tests/agent/",
    "tests/cli/",
    "tests/client/",
    "tests/api/ui/",
    "tests/api/test_longpoll_live.py",
    "tests/api/test_observability_live.py",
    "tests/api/test_liveness_live.py",
    "tests/api/test_schema_gate.py",
)


#: Tests run between two settlings of the heap (pytest_runtest_logfinish).
SETTLE_EVERY = 200
_tests_finished = itertools.count(1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Set what every test shares (the modules, the collected tests) aside from the
    garbage collector, as the serving process does with its start-up heap (app.heap):
    a full collection then walks only what the tests made, not half a million objects
    each time (it took seconds late in a run).

    The collector runs less often than Python's default (700, 10, 10): a young
    collection after 5,000 allocations, a full one a tenth as often. A property test that
    sends hundreds of requests made 2,590 young and 21 full collections with the
    defaults, 3.8-5.5 s of its time on a quiet machine and 40 s on a loaded one; with
    these, 257 young ones and no full one, 1.1 s (tests/hostile/test_extreme_numbers.py,
    CI profile, run alone). The garbage waits a little longer; the test processes end
    at 0.3-0.5 GB resident."""
    gc.set_threshold(5000, 10, 100)
    heap.settle()


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Every SETTLE_EVERY tests, set aside again what has survived them (the caches of
    compiled statements, parsed notations and Hypothesis' strategies grow to hundreds of
    thousands of objects): one collection now instead of ever longer ones in later tests
    (one test spent 6 s in the collector). What is garbage now is collected first.

    What a settling froze and later became garbage stays uncollected; thawing first would
    walk the whole heap at every settling. The test processes end at 0.4-0.5 GB
    resident with it frozen (the profile plugin's figures), so it stays frozen."""
    if next(_tests_finished) % SETTLE_EVERY == 0:
        heap.settle()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        for position, prefix in enumerate(RUN_FIRST):
            if path.startswith(prefix):
                return position
        return len(RUN_FIRST)

    items.sort(key=rank)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True, scope="session")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "postgresql" and postgres_server_url() is None:
        pytest.skip("PostgreSQL not configured (set JOBMATCH_TEST_POSTGRES_URL)")
    return name


@pytest.fixture(scope="session")
def database_url(
    backend: str, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[str]:
    """A database of the backend at the migrations' head, one per test process."""
    shared = run_directory(pytestconfig)
    with migrated_database(backend, tmp_path_factory.mktemp(backend), shared) as url:
        yield url


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's controlling process (the only one without a worker id) drops the
    PostgreSQL template the workers copied their databases from."""
    if not hasattr(session.config, "workerinput"):
        drop_templates(run_directory(session.config))


@pytest.fixture(scope="session")
def _session_database(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def database(_session_database: Database) -> Iterator[Database]:
    """The migrated database, with every non-seeded table empty at the start of the test."""
    empty_tables(_session_database, Base.metadata)
    yield _session_database


@pytest.fixture(scope="session")
def _shared_live_server(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    running = LiveServer(
        database_url,
        tmp_path_factory.mktemp("shared-server") / "server.log",
        env={"JOBMATCH_LEASE_SWEEP_SECONDS": "0"},
    )
    running.start()
    yield running
    running.stop()


@pytest.fixture
def shared_server(_shared_live_server: LiveServer, database: Database) -> LiveServer:
    """`jobmatch serve` on the test database, started once per test process and backend
    for the tests that only talk to a server (the CLI's, the client's, the console's):
    each starts from empty tables, as every database test does. The server keeps no state
    of its own that a test could see (its caches are keyed by what they cache, and new
    workers and jobs are announced to it), and its lease sweep is off, so nothing changes
    behind a test. Tests that stop, kill or configure a server start their own."""
    process = _shared_live_server.process
    assert process is not None and process.poll() is None, (
        f"the shared server has exited: {_shared_live_server.log.read_text()[-2000:]}"
    )
    return _shared_live_server


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        admin_token=SecretStr(ADMIN_TOKEN),
        log_format="text",
        log_level="WARNING",
    )


@pytest.fixture
def client(settings: Settings, database: Database) -> Iterator[TestClient]:
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]
