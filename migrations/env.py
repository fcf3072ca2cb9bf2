"""Alembic environment: one tree for both databases, batch mode on SQLite."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

import app.db.models  # noqa: F401  (registers every table on the metadata)
from app.db.base import Base
from app.db.migrate import include_object
from app.settings import get_settings

config = context.config
if config.config_file_name is not None and not config.attributes.get("database_url"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def database_url() -> str:
    url = config.attributes.get("database_url") or get_settings().database_url
    return str(url)


def run_migrations_offline() -> None:
    """Print the SQL instead of running it (`jobmatch db upgrade --sql`)."""
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = create_engine(database_url(), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    is_sqlite = connection.dialect.name == "sqlite"
    if is_sqlite:
        # Batch mode rebuilds a table and renames the copy into place; with the modern
        # rename SQLite re-checks every view and fails while the original is gone. The
        # views name tables, not table versions, so the legacy rename is correct here.
        connection.exec_driver_sql("PRAGMA legacy_alter_table=ON")
        connection.commit()  # end the implicit transaction, so Alembic's own ones commit
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        render_as_batch=is_sqlite,
        compare_type=True,
        include_object=include_object,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
