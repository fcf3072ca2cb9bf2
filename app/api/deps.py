"""Request-scoped dependencies: the database session (one transaction per request)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.revocations import REVOKED_KEY, RevocationWatch

_READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: How long a request that revoked tokens waits for every process to hear it: normally a
#: few milliseconds; bounded so that a lost listener delays nothing for long (a process
#: that does not listen trusts no remembered token anyway).
REVOCATION_HEARD_SECONDS = 2.0


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request, committed before the response is sent.

    Requests that may write start it with the write lock on SQLite (BEGIN IMMEDIATE).
    """
    database = get_database(request)
    watch: RevocationWatch | None = getattr(request.app.state, "revocations", None)
    with database.transaction(write=request.method not in _READ_ONLY_METHODS) as session:
        yield session
    revoked = session.info.get(REVOKED_KEY)
    if watch is not None and revoked is not None:
        # Tokens were revoked: answer once every process heard it (app/db/revocations.py),
        # so that the caller's next request meets no process that still trusts them.
        watch.wait_heard_everywhere(revoked, REVOCATION_HEARD_SECONDS)


# scope="function": the commit runs when the endpoint returns, so a failed commit becomes
# the response instead of happening after the client was told "201".
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
DatabaseDep = Annotated[Database, Depends(get_database)]
