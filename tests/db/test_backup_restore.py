"""The backup and restore of docs/operations.md work as it says (issue 39).

A backup is taken the way the page says, while `jobmatch serve` runs and has a job running
and one waiting: SQLite's `VACUUM INTO` (through Python's sqlite3 module, the same statement
the page gives the `sqlite3` shell), PostgreSQL's `pg_dump -Fc` restored by `pg_restore
--no-owner` into a new, empty database. The copy must then be what the page promises: at
the head revision for `jobmatch db current`, balanced for `jobmatch db check`, and the
cluster as it was at the backup (a job submitted after it is not there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.databases import fresh_database, migrated_database, run_directory
from tests.live_server import LiveServer


@pytest.fixture
def serving(backend: str, tmp_path: Path, pytestconfig: pytest.Config) -> Iterator[LiveServer]:
    """`jobmatch serve` on a fresh, migrated database of the backend."""
    with migrated_database(backend, tmp_path, run_directory(pytestconfig)) as url:
        server = LiveServer(url, tmp_path / "server.log")
        server.start()
        try:
            yield server
        finally:
            server.stop()


def busy_cluster(server: LiveServer) -> tuple[int, int]:
    """A worker with a running job and a waiting one; their ids."""
    status, worker = server.request("POST", "/v1/workers", {"name": "w1", "slots": 1})
    assert status == 201, worker
    jobs = []
    for _ in range(2):
        status, job = server.request("POST", "/v1/jobs", {"command": ["true"]})
        assert status == 201, job
        jobs.append(job["id"])
    status, pulled = server.request("POST", "/v1/workers/w1/pull", token=worker["token"])
    assert status == 200 and pulled["id"] == jobs[0], pulled
    return jobs[0], jobs[1]


def sqlite_backup(url: str, directory: Path) -> str:
    """`VACUUM INTO` a new file, as the page says; the copy's URL."""
    source = make_url(url).database
    assert source is not None
    target = directory / "backup.db"
    connection = sqlite3.connect(source)
    try:
        connection.execute("VACUUM INTO ?", (str(target),))
    finally:
        connection.close()
    integrity = sqlite3.connect(target)
    try:
        assert integrity.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        integrity.close()
    return f"sqlite:///{target}"


def libpq(url: str) -> str:
    """The URL as libpq's programs read it (no SQLAlchemy driver name)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def postgres_dump(url: str, directory: Path) -> Path:
    """`pg_dump -Fc`, as the page says; the dump file."""
    dump = directory / "jobmatch.dump"
    subprocess.run(
        ["pg_dump", "-Fc", "-d", libpq(url), "-f", str(dump)],
        check=True,
        capture_output=True,
        text=True,
    )
    return dump


def postgres_restore(dump: Path, url: str) -> None:
    """`pg_restore --no-owner` into the empty database at ``url``."""
    subprocess.run(
        ["pg_restore", "--no-owner", "-d", libpq(url), str(dump)],
        check=True,
        capture_output=True,
        text=True,
    )


def jobmatch_db(url: str, command: str) -> subprocess.CompletedProcess[str]:
    """`jobmatch db COMMAND` against ``url``, as an operator runs it."""
    env = {**os.environ, "JOBMATCH_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "db", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def jobs_in(url: str) -> list[tuple[int, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, state FROM jobs ORDER BY id")).all()
    finally:
        engine.dispose()
    return [(int(row[0]), str(row[1]).lower()) for row in rows]


def test_a_backup_taken_while_serving_restores_at_head_with_its_books_balanced(
    serving: LiveServer, tmp_path: Path
) -> None:
    running, waiting = busy_cluster(serving)
    with contextlib.ExitStack() as cleanup:
        if serving.database_url.startswith("sqlite"):
            copy_url = sqlite_backup(serving.database_url, tmp_path)
        else:
            if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
                pytest.skip("pg_dump and pg_restore are not installed")
            dump = postgres_dump(serving.database_url, tmp_path)
            copy_url = cleanup.enter_context(fresh_database("postgresql", tmp_path))
            postgres_restore(dump, copy_url)
        # The server goes on after the backup: what it stores now is not in the copy.
        status, later = serving.request("POST", "/v1/jobs", {"command": ["true"]})
        assert status == 201, later
        current = jobmatch_db(copy_url, "current")
        assert current.returncode == 0 and "(at head)" in current.stdout, current
        check = jobmatch_db(copy_url, "check")
        assert check.returncode == 0 and check.stdout.startswith("ok:"), check
        assert jobs_in(copy_url) == [(running, "running"), (waiting, "waiting")]
        assert (later["id"], "waiting") in jobs_in(serving.database_url)
