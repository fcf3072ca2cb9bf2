"""`jobmatch db ...` (issue 21): each command says what it did, never creates a database it
only reads, prints a downgrade's SQL or says what it needs, and reports an unreachable
database in one line with exit code 3."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from app.cli import cli
from app.cli.errors import ExitCode
from app.db import migrate
from app.settings import get_settings

runner = CliRunner()

(HEAD,) = migrate.head_revisions()
#: The revision before head: where `db downgrade -1` goes.
BEFORE = str(
    ScriptDirectory.from_config(migrate.alembic_config("sqlite://"))
    .get_revision(HEAD)
    .down_revision
)
UNREACHABLE_POSTGRES = "postgresql+psycopg://nobody@127.0.0.1:1/jobmatch"


@pytest.fixture
def sqlite_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cli.db"
    monkeypatch.setenv("JOBMATCH_DATABASE_URL", f"sqlite:///{path}")
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


def test_current_on_a_missing_sqlite_file_says_so_and_creates_nothing(sqlite_path: Path) -> None:
    result = runner.invoke(cli, ["db", "current"])
    assert result.exit_code == ExitCode.UNREACHABLE
    assert f"error: no database file at {sqlite_path}" in result.output
    assert "`jobmatch db upgrade` creates it" in result.output
    assert not sqlite_path.exists()


def test_upgrade_says_from_which_revision_to_which(sqlite_path: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade", "0012"])
    assert result.exit_code == 0, result.output
    assert result.output == f"sqlite:///{sqlite_path}: upgraded from (empty) to 0012\n"
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.output == f"sqlite:///{sqlite_path}: upgraded from 0012 to {HEAD}\n"
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.output == f"sqlite:///{sqlite_path}: already at {HEAD}, nothing to apply\n"
    result = runner.invoke(cli, ["db", "current"])
    assert result.exit_code == 0 and result.output == f"{HEAD} (at head)\n"


def test_downgrade_says_from_which_revision_to_which(sqlite_path: Path) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(cli, ["db", "downgrade", "-1"])
    assert result.exit_code == 0, result.output
    assert result.output == f"sqlite:///{sqlite_path}: downgraded from {HEAD} to {BEFORE}\n"
    assert runner.invoke(cli, ["db", "downgrade", "base"]).exit_code == 0
    assert migrate.current_revisions_at(f"sqlite:///{sqlite_path}") == set()


def test_upgrade_sql_prints_without_touching(sqlite_path: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade", "--sql"])
    assert result.exit_code == 0
    assert "CREATE TABLE api_tokens" in result.output
    assert not sqlite_path.exists()


def test_downgrade_sql_starts_from_the_current_revision(sqlite_path: Path) -> None:
    """Alembic prints a downgrade's SQL only for a FROM:TO range (issue 21: it crashed)."""
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(cli, ["db", "downgrade", BEFORE, "--sql"])
    assert result.exit_code == 0, result.output
    assert f"-- Running downgrade {HEAD} -> {BEFORE}" in result.output
    assert f"UPDATE alembic_version SET version_num='{BEFORE}'" in result.output
    # Printed, not run.
    assert migrate.current_revisions_at(f"sqlite:///{sqlite_path}") == {HEAD}


def test_downgrade_sql_without_a_database_needs_a_range(sqlite_path: Path) -> None:
    result = runner.invoke(cli, ["db", "downgrade", BEFORE, "--sql"])
    assert result.exit_code == ExitCode.USAGE
    hint = f"give it as FROM:TO, e.g. jobmatch db downgrade {HEAD}:{BEFORE} --sql"
    assert hint in result.output
    assert not sqlite_path.exists()
    result = runner.invoke(cli, ["db", "downgrade", f"{HEAD}:{BEFORE}", "--sql"])
    assert result.exit_code == 0, result.output
    assert f"UPDATE alembic_version SET version_num='{BEFORE}'" in result.output
    assert not sqlite_path.exists()


def test_an_unknown_revision_is_one_line(sqlite_path: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade", "9999"])
    assert result.exit_code == ExitCode.USAGE
    assert result.output.startswith("error: ") and "9999" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("arguments", [["db", "current"], ["db", "upgrade"], ["db", "check"]])
def test_an_unreachable_postgresql_is_one_line_without_a_traceback(arguments: list[str]) -> None:
    """Issue 21: a 459-line traceback before. The installed program (python -m app.cli)."""
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", *arguments],
        env={"PATH": "/usr/bin:/bin", "JOBMATCH_DATABASE_URL": UNREACHABLE_POSTGRES},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == ExitCode.UNREACHABLE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        "error: cannot use the database at postgresql+psycopg://nobody@127.0.0.1:1/jobmatch: "
    )
    assert "Connection refused" in result.stderr
