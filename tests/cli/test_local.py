"""The `jobmatch` command line's local commands: serve's migration rule and the demo."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from app import cli as cli_module
from app.cli import local
from app.db import migrate
from app.db.engine import Database
from app.matching.workers import WorkerSpec, upsert_worker
from app.settings import get_settings
from tests.cli.conftest import run_jobmatch
from tests.live_server import free_port

runner = CliRunner()


@pytest.fixture(autouse=True)
def own_metrics_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` exports PROMETHEUS_MULTIPROC_DIR into its process's environment, here the
    test process's: every server a later test of the process started inherited it, and
    each emptied it at its start. Of two servers of one test, the second wiped the
    first's metrics files, and the first's long-poll gauge stayed at 0 for good (CI
    failed so in tests/api/test_longpoll_live.py). The test's own directory, undone after."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))


@pytest.fixture
def sqlite_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("JOBMATCH_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url  # type: ignore[misc]
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def server_processes_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve tells its worker processes how many they are through the environment: set
    here first, so that the test's process gets its own back afterwards."""
    monkeypatch.setenv("JOBMATCH_SERVER_PROCESSES", "1")
    monkeypatch.setenv("JOBMATCH_LISTEN_URL", "")


Served = list[tuple[object, int]]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Served:
    """serve's uvicorn step replaced: each call's config and the port of the socket serve
    bound (closed again, as the server would at its end)."""
    calls: Served = []

    def serve_on(config: object, listener: socket.socket) -> None:
        calls.append((config, listener.getsockname()[1]))
        listener.close()

    monkeypatch.setattr(local, "_serve_on", serve_on)
    return calls


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """serve configures logging before it logs its budgets: its handler writes to the
    CliRunner's stderr, closed once the command returns. Left in place, every later log
    record of this test process printed '--- Logging error ---' into the next CliRunner's
    output (two scenario tests read it as JSON, and failed)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_serve_migrates_sqlite_first(sqlite_env: str, served: Served) -> None:
    port = free_port()
    result = runner.invoke(cli_module.cli, ["serve", "--port", str(port), "--workers", "2"])
    assert result.exit_code == 0, result.output
    [(config, bound)] = served
    assert bound == port and getattr(config, "workers", None) == 2
    assert os.environ["JOBMATCH_SERVER_PROCESSES"] == "2"
    # The server processes learn where they listen, for their "listening on" line.
    assert os.environ["JOBMATCH_LISTEN_URL"] == f"http://127.0.0.1:{port}"
    assert migrate.current_revisions_at(sqlite_env) == migrate.head_revisions()


def test_serve_on_port_0_names_the_port_the_system_chose(sqlite_env: str, served: Served) -> None:
    assert runner.invoke(cli_module.cli, ["serve", "--port", "0"]).exit_code == 0
    [(_config, bound)] = served
    assert bound > 0 and os.environ["JOBMATCH_LISTEN_URL"] == f"http://127.0.0.1:{bound}"


def test_serve_no_migrate_flag(sqlite_env: str, served: Served) -> None:
    assert runner.invoke(cli_module.cli, ["serve", "--no-migrate", "--port", "0"]).exit_code == 0
    assert migrate.current_revisions_at(sqlite_env) == set()


def test_serve_does_not_migrate_postgresql_unless_asked(
    monkeypatch: pytest.MonkeyPatch, served: Served
) -> None:
    monkeypatch.setenv("JOBMATCH_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:1/x")
    get_settings.cache_clear()
    upgrades: list[str] = []
    monkeypatch.setattr(migrate, "upgrade", lambda url, *a, **k: upgrades.append(url))
    try:
        assert runner.invoke(cli_module.cli, ["serve", "--port", "0"]).exit_code == 0
        assert upgrades == []
        assert runner.invoke(cli_module.cli, ["serve", "--port", "0", "--migrate"]).exit_code == 0
        assert len(upgrades) == 1
    finally:
        get_settings.cache_clear()


def test_demo_shows_candidates_explanations_and_dispatch(sqlite_env: str, tmp_path: Path) -> None:
    demo_url = f"sqlite:///{tmp_path / 'chosen.db'}"
    result = runner.invoke(cli_module.cli, ["demo", "--database-url", demo_url])
    assert result.exit_code == 0, result.output
    assert f"4 workers registered; 9 jobs submitted in {demo_url}" in result.output
    # The Momotor documentation's second job: nothing offers java 14.
    assert (
        "job 2 [language: java; java: 14] slots=1 priority=0: failed (No suitable worker found)"
        in result.output
    )
    assert "candidate gpu-node     strength  -1.0 (STRONG)" in result.output
    assert "not gpu-node     the worker only runs jobs that ask for tag 'cuda'" in result.output
    assert "gpu-node     -> job 7" in result.output  # priority 5 goes first


def test_demo_writes_its_own_database_not_the_servers(
    sqlite_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: after `jobmatch demo`, the server's database holds none of the demo's jobs."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli_module.cli, ["demo", "--no-pull"])
    assert result.exit_code == 0, result.output
    assert "jobs submitted in sqlite:///./jobmatch-demo.db" in result.output
    assert (tmp_path / "jobmatch-demo.db").is_file()
    # JOBMATCH_DATABASE_URL (the server's database) was neither created nor migrated.
    assert not (tmp_path / "cli.db").exists()
    assert migrate.current_revisions_at(sqlite_env) == set()


def test_demo_help_says_where_it_writes() -> None:
    result = runner.invoke(cli_module.cli, ["demo", "--help"])
    assert result.exit_code == 0
    assert "jobmatch-demo.db" in result.output and "--database-url" in result.output


def test_demo_starts_afresh_each_run_unless_kept(tmp_path: Path) -> None:
    """Issue 39: three runs of the demo gave 27 jobs, their ids and the dispatch moving."""
    (tmp_path / "metrics").mkdir()  # own_metrics_directory's, which the program inherits
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    first = run_jobmatch("demo", "--database-url", url)
    second = run_jobmatch("demo", "--database-url", url)
    assert first.code == 0 and second.code == 0, (first, second)
    # The same report both times: the same job ids, the same dispatch.
    assert first.stdout == second.stdout
    assert first.stdout.startswith(f"{url}: started afresh (--keep adds to what it holds")
    assert "docs-worker  -> job 1\n" in second.stdout
    assert _jobs_in(url) == 9

    kept = run_jobmatch("demo", "--keep", "--database-url", url)
    assert kept.code == 0, kept
    assert kept.stdout.startswith(f"{url}: kept what it held (--keep): the demo adds to it")
    assert "job 10 [" in kept.stdout and "docs-worker  -> job 1\n" not in kept.stdout
    assert _jobs_in(url) == 18


def test_demo_never_starts_afresh_a_database_that_is_not_its_own(
    tmp_path: Path, sqlite_env: str
) -> None:
    """A database holding a worker or a job the demo did not put there is refused, whole."""
    (tmp_path / "metrics").mkdir()  # own_metrics_directory's, which the program inherits
    migrate.upgrade(sqlite_env)
    database = Database(sqlite_env)
    try:
        with database.transaction() as session:
            upsert_worker(session, WorkerSpec(name="build-7"))
    finally:
        database.dispose()
    before = Path(sqlite_env.removeprefix("sqlite:///")).read_bytes()
    refused = run_jobmatch("demo", "--database-url", sqlite_env)
    assert refused.code == 2, refused
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"error: {sqlite_env} holds what the demo did not put there (worker build-7): the demo "
        "starts afresh only a database of its own; name another with --database-url, or add "
        "to this one with --keep"
    ]
    assert Path(sqlite_env.removeprefix("sqlite:///")).read_bytes() == before


def _jobs_in(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM jobs")).scalar_one())
    finally:
        engine.dispose()
