"""`jobmatch db ...`: the schema migrations and the bookkeeping check, on the database of
JOBMATCH_DATABASE_URL; and the one-line report of a database that cannot be reached, which
every local command shares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from app.cli.errors import ExitCode, fail
from app.cli.help import command_group, examples

db_cli = command_group(
    "Database schema migrations (Alembic) and the bookkeeping check, on the database "
    "of JOBMATCH_DATABASE_URL."
)


def shown_url(url: str) -> str:
    """The URL as it may be printed: without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is reported by the command that uses it
        return url


def missing_sqlite_file(url: str) -> Path | None:
    """The path of a SQLite database file that does not exist (None for any other URL),
    so that read-only commands can say so instead of creating an empty file."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    path = Path(database)
    return None if path.exists() else path


#: URL schemes other programs accept for PostgreSQL (Heroku, libpq, psql) that SQLAlchemy
#: does not load, or loads with a driver jobmatch does not install (psycopg2).
POSTGRES_SCHEMES = ("postgres", "postgresql", "postgresql+psycopg2")


def database_url_mistake(url: str) -> str | None:
    """What is wrong with a database URL people often give, in one line (None when it
    looks usable): `postgres://` makes SQLAlchemy say "Can't load plugin", and a plain
    `postgresql://` asks for psycopg2, which is not installed; jobmatch speaks psycopg 3."""
    scheme, separator, rest = url.strip().partition("://")
    if separator and scheme.lower() in POSTGRES_SCHEMES:
        return (
            f"the database URL {shown_url(url)!r} starts with {scheme}://, which jobmatch "
            f"cannot use: give {shown_url('postgresql+psycopg://' + rest)!r} (psycopg 3)"
        )
    return None


def check_database_url(url: str) -> None:
    """Stop with one line and exit 2 when ``url`` is a database URL people get wrong."""
    mistake = database_url_mistake(url)
    if mistake is not None:
        fail(mistake, ExitCode.USAGE)


@contextmanager
def database_errors(url: str) -> Iterator[None]:
    """Report a database that cannot be reached, or a migration that cannot run, in one
    line with its exit code instead of a traceback (a mistaken URL is said first)."""
    check_database_url(url)
    from alembic.util import CommandError as AlembicCommandError
    from sqlalchemy.exc import ArgumentError, DBAPIError

    from app.db.migrate import MigrationsNotFoundError

    try:
        yield
    except DBAPIError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        fail(f"cannot use the database at {shown_url(url)}: {reason}", ExitCode.UNREACHABLE)
    except ArgumentError as error:
        fail(f"not a database URL: {shown_url(url)} ({error})", ExitCode.USAGE)
    except AlembicCommandError as error:
        fail(str(error), ExitCode.USAGE)
    except MigrationsNotFoundError as error:
        fail(str(error), ExitCode.SERVER)


def _database_url() -> str:
    from app.settings import get_settings

    return get_settings().database_url


def _revisions(revisions: set[str]) -> str:
    return ", ".join(sorted(revisions)) or "(empty)"


@db_cli.command(
    "upgrade",
    epilog=examples(
        "jobmatch db upgrade",
        "jobmatch db upgrade 0013",
        "jobmatch db upgrade --sql > upgrade.sql",
    ),
)
def db_upgrade(
    revision: Annotated[str, typer.Argument(metavar="[REVISION]", help="target revision")] = "head",
    sql: Annotated[bool, typer.Option("--sql", help="print the SQL instead of running it")] = False,
) -> None:
    """Upgrade the schema (to head by default) and say from which revision to which."""
    from app.db import migrate

    url = _database_url()
    with database_errors(url):
        if sql:
            migrate.upgrade(url, revision, sql=True)
            return
        before = migrate.current_revisions_at(url)
        migrate.upgrade(url, revision)
        after = migrate.current_revisions_at(url)
    where = shown_url(url)
    if before == after:
        typer.echo(f"{where}: already at {_revisions(after)}, nothing to apply")
    else:
        typer.echo(f"{where}: upgraded from {_revisions(before)} to {_revisions(after)}")


def offline_range(url: str, revision: str) -> str:
    """The `FROM:TO` range Alembic needs to print a downgrade's SQL: REVISION when it is
    one already, else the database's current revision to REVISION."""
    from app.db import migrate

    if ":" in revision:
        return revision
    missing = missing_sqlite_file(url)
    current = set() if missing else migrate.current_revisions_at(url)
    if len(current) != 1:
        fail(
            f"--sql needs the revision to start from: the database at {shown_url(url)} "
            f"{'does not exist' if missing else 'has no single current revision'}; "
            f"give it as FROM:TO, e.g. jobmatch db downgrade "
            f"{','.join(sorted(migrate.head_revisions()))}:{revision} --sql",
            ExitCode.USAGE,
        )
    return f"{next(iter(current))}:{revision}"


@db_cli.command(
    "downgrade",
    # So that a relative revision such as -1 is read as the argument, not as an option.
    context_settings={"ignore_unknown_options": True},
    epilog=examples(
        "jobmatch db downgrade -1",
        "jobmatch db downgrade base",
        "jobmatch db downgrade 0013 --sql",
        "jobmatch db downgrade 0014:0012 --sql   # without a database",
    ),
)
def db_downgrade(
    revision: Annotated[
        str,
        typer.Argument(
            metavar="REVISION", help="target revision, e.g. -1, base, 0013 (FROM:TO with --sql)"
        ),
    ],
    sql: Annotated[
        bool,
        typer.Option(
            "--sql",
            help="print the SQL instead of running it (from the database's current revision, "
            "or from FROM when REVISION is FROM:TO)",
        ),
    ] = False,
) -> None:
    """Downgrade the schema to REVISION and say from which revision to which."""
    from app.db import migrate

    url = _database_url()
    with database_errors(url):
        if sql:
            migrate.downgrade(url, offline_range(url, revision), sql=True)
            return
        before = migrate.current_revisions_at(url)
        migrate.downgrade(url, revision)
        after = migrate.current_revisions_at(url)
    typer.echo(f"{shown_url(url)}: downgraded from {_revisions(before)} to {_revisions(after)}")


def require_existing_database(url: str) -> None:
    """Stop, saying so, when the SQLite file of ``url`` does not exist."""
    missing = missing_sqlite_file(url)
    if missing is not None:
        fail(
            f"no database file at {missing.resolve()} (JOBMATCH_DATABASE_URL={shown_url(url)}); "
            "`jobmatch db upgrade` creates it",
            ExitCode.UNREACHABLE,
        )


@db_cli.command("current", epilog=examples("jobmatch db current"))
def db_current() -> None:
    """Show the schema revision of the database and whether it is at head (never creates a
    database)."""
    from app.db import migrate

    url = _database_url()
    require_existing_database(url)
    with database_errors(url):
        current = migrate.current_revisions_at(url)
        heads = migrate.head_revisions()
    state = "at head" if current == heads else f"head is {', '.join(sorted(heads))}"
    typer.echo(f"{_revisions(current)} ({state})")


@db_cli.command("check", epilog=examples("jobmatch db check"))
def db_check() -> None:
    """Check the bookkeeping invariants (exit 1 and list them when any is broken)."""
    from app.db.engine import Database
    from app.matching.invariants import violations

    url = _database_url()
    require_existing_database(url)
    with database_errors(url):
        database = Database(url)
        try:
            with database.transaction(write=False) as session:
                problems = violations(session)
        finally:
            database.dispose()
    for problem in problems:
        typer.echo(problem, err=True)
    if problems:
        raise typer.Exit(int(ExitCode.REFUSED))
    typer.echo("ok: every job is in one state and the bookings equal what running jobs hold")
