"""Request-scoped dependencies: the database session (one transaction per request)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db.engine import Database

_READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request, committed before the response is sent.

    Requests that may write start it with the write lock on SQLite (BEGIN IMMEDIATE).
    """
    database = get_database(request)
    with database.transaction(write=request.method not in _READ_ONLY_METHODS) as session:
        yield session


# scope="function": the commit runs when the endpoint returns, so a failed commit becomes
# the response instead of happening after the client was told "201".
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
DatabaseDep = Annotated[Database, Depends(get_database)]
