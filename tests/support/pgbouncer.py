"""A real PgBouncer in transaction pooling, started on a free loopback port in front of the
test PostgreSQL server (Debian's ``pgbouncer`` package; tests skip without it).

Every database of the server is reachable through it under its own name (the ``*``
fallback entry), so a test database made by tests/databases.py is too. Authentication is
trust, as on the test server itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from tests.live_server import free_port

#: Where Debian installs it (/usr/sbin is not on every user's PATH).
EXECUTABLE = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").is_file() else None
)

START_SECONDS = 10.0


def pooled_url(server_url: str, port: int) -> str:
    """The server URL (same user and database) pointed at the pooler."""
    url = make_url(server_url).set(host="127.0.0.1", port=port)
    return url.render_as_string(hide_password=False)


def _config(directory: Path, server_url: str, port: int) -> Path:
    server = make_url(server_url)
    user = server.username or "postgres"
    (directory / "users.txt").write_text(f'"{user}" ""\n')
    lines = [
        "[databases]",
        f"* = host={server.host or '127.0.0.1'} port={server.port or 5432}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {directory / 'users.txt'}",
        "pool_mode = transaction",
        "max_client_conn = 1000",
        "default_pool_size = 40",
        f"admin_users = {user}",
    ]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root; it changes to this user after start-up.
        lines.append("user = postgres")
    config = directory / "pgbouncer.ini"
    config.write_text("\n".join(lines) + "\n")
    for path in directory.iterdir():
        path.chmod(0o644)
    directory.chmod(0o755)
    return config


@contextmanager
def running_pgbouncer(server_url: str, directory: Path) -> Iterator[int]:
    """Run PgBouncer until the block ends; yields its port."""
    assert EXECUTABLE is not None
    port = free_port()
    config = _config(directory, server_url, port)
    log = (directory / "pgbouncer.log").open("wb")
    process = subprocess.Popen([EXECUTABLE, str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_it_answers(process, pooled_url(server_url, port), directory)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_until_it_answers(process: subprocess.Popen[bytes], url: str, directory: Path) -> None:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    deadline = time.monotonic() + START_SECONDS
    while True:
        if process.poll() is not None:
            log = (directory / "pgbouncer.log").read_text(errors="replace")
            raise RuntimeError(f"pgbouncer exited with {process.returncode}:\n{log}")
        try:
            with psycopg.connect(conninfo, connect_timeout=2, autocommit=True) as connection:
                connection.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def admin_show(url: str, port: int, what: str) -> list[dict[str, object]]:
    """Rows of PgBouncer's admin console ``SHOW <what>`` (STATS, POOLS, ...)."""
    conninfo = (
        make_url(url)
        .set(drivername="postgresql", host="127.0.0.1", port=port, database="pgbouncer")
        .render_as_string(hide_password=False)
    )
    # The admin console speaks the simple query protocol only.
    with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as connection:
        cursor = connection.cursor()
        cursor.execute(f"SHOW {what}".encode(), prepare=False)  # type: ignore[arg-type]
        names = [column.name for column in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
