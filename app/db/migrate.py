"""Alembic, driven from code: the CLI, the server start-up and the tests all come here."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.db.engine import end_read
from app.settings import get_settings

#: The Alembic tree as a package of the distribution: pyproject.toml maps the repository's
#: top-level migrations/ onto it, in a wheel and in an editable install alike.
MIGRATIONS_PACKAGE = "app.migrations"


class MigrationsNotFoundError(RuntimeError):
    """No Alembic tree (a folder with env.py) was found: neither the configured
    JOBMATCH_MIGRATIONS_DIR, nor the package app.migrations, nor migrations/ of a checkout."""


def packaged_migrations_dir() -> Path | None:
    """The folder of the installed app.migrations package, when it is one on disk."""
    try:
        folder = resources.files(MIGRATIONS_PACKAGE)
    except ModuleNotFoundError:
        return None
    # A wheel or an editable install unpacks to plain folders; Alembic needs a real path.
    path = Path(str(folder))
    return path if (path / "env.py").is_file() else None


def migrations_dir() -> Path:
    """Where the Alembic tree is: the setting first, then the package, then a checkout's."""
    configured = get_settings().migrations_dir
    candidates = [configured, packaged_migrations_dir()]
    candidates += [Path(__file__).resolve().parents[2] / "migrations"]
    for candidate in candidates:
        if candidate is not None and (candidate / "env.py").is_file():
            return candidate
    raise MigrationsNotFoundError(
        "no Alembic tree found (the package app.migrations is missing from this installation); "
        "set JOBMATCH_MIGRATIONS_DIR to a folder holding env.py and versions/"
    )


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # env.py takes the URL from here, so a caller can migrate any database it names.
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head", *, sql: bool = False) -> None:
    command.upgrade(alembic_config(url), revision, sql=sql)


def downgrade(url: str, revision: str, *, sql: bool = False) -> None:
    command.downgrade(alembic_config(url), revision, sql=sql)


def head_revisions() -> set[str]:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    return set(ScriptDirectory.from_config(config).get_heads())


def current_revisions(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        heads = set(MigrationContext.configure(connection).get_current_heads())
        end_read(connection)
        return heads


def current_revisions_at(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return current_revisions(engine)
    finally:
        engine.dispose()


#: Indexes on expressions (``priority DESC``) that SQLite's reflection cannot compare with
#: the model; the migrations create them, autogenerate must not try to "fix" them.
EXPRESSION_INDEXES = frozenset({"ix_jobs_waiting_order", "ix_jobs_waiting_submitter_order"})


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Alembic autogenerate filter shared by env.py and the schema test."""
    return not (type_ == "index" and name in EXPRESSION_INDEXES)
