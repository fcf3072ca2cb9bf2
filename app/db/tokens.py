"""Issuing, resolving and revoking bearer tokens (SQL side of authentication)."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import ApiToken, ConsoleSession, Role
from app.db.revocations import announce_revocation


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(
    session: Session,
    *,
    role: Role,
    subject: str,
    label: str = "",
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Store a new token's hash and return the row with the clear token (shown once)."""
    clear = "jm_" + secrets.token_urlsafe(32)
    row = ApiToken(
        token_hash=hash_token(clear),
        role=role,
        subject=subject,
        label=label,
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return row, clear


#: Built once: every authenticated request runs it, and building the statement and
#: loading an ORM object cost more than the lookup itself.
_ACTIVE_TOKEN = select(ApiToken.id, ApiToken.role, ApiToken.subject, ApiToken.expires_at).where(
    ApiToken.token_hash == bindparam("p_hash"), ApiToken.revoked_at.is_(None)
)


class ActiveToken(NamedTuple):
    """An unrevoked token as authentication needs it. An expired one is found too, so
    that the answer can say it expired rather than that it is unknown."""

    id: int
    role: Role
    subject: str
    expires_at: datetime | None


def find_active_token(session: Session, token_hash: str) -> ActiveToken | None:
    """The unrevoked token with this hash (:func:`hash_token`)."""
    row = session.execute(_ACTIVE_TOKEN, {"p_hash": token_hash}).one_or_none()
    return None if row is None else ActiveToken(row[0], row[1], row[2], row[3])


def record_use(session: Session, token_id: int, when: datetime) -> None:
    """Note that the token was presented at ``when`` (never moving the record back)."""
    session.execute(
        update(ApiToken)
        .where(
            ApiToken.id == token_id,
            or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < when),
        )
        .values(last_used_at=when)
    )


def revoke_token(session: Session, token_id: int) -> ApiToken | None:
    row = session.get(ApiToken, token_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()
        # Its console sessions end with it (they are refused anyway, being read joined
        # to the token; deleting them leaves nothing behind).
        session.execute(delete(ConsoleSession).where(ConsoleSession.token_id == token_id))
        # Every API process forgets what it remembered of tokens (app/db/revocations.py).
        announce_revocation(session)
    return row


def has_usable_token(session: Session, *, role: Role, subject: str) -> bool:
    """Whether ``subject`` holds a token of ``role`` that works now: not revoked, and not
    past its expiry."""
    now = utcnow()
    found = session.scalar(
        select(ApiToken.id)
        .where(
            ApiToken.role == role,
            ApiToken.subject == subject,
            ApiToken.revoked_at.is_(None),
            or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now),
        )
        .limit(1)
    )
    return found is not None


def list_tokens(session: Session, *, limit: int, offset: int) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id).limit(limit).offset(offset)))


class DirectTokenReader:
    """SQLite: the role and subject of an unrevoked token, read from the database file on a
    connection of its own, without a pooled session or a thread: an index seek in the
    process, which sees every commit of every process at once (WAL readers never wait for
    the writer). For the token gate, which calls it from the event loop; None for an
    in-memory database (no other connection sees it) or any other database."""

    def __init__(self, path: str) -> None:
        # Autocommit: each read sees the latest commit, and no read transaction stays open.
        self._connection = sqlite3.connect(
            path, timeout=1.0, check_same_thread=False, isolation_level=None
        )

    @classmethod
    def for_url(cls, url: str) -> DirectTokenReader | None:
        parsed = make_url(url)
        path = parsed.database
        if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
            return None
        if "mode=memory" in str(parsed):
            return None
        return cls(path)

    def find(self, token_hash: str) -> ActiveToken | None:
        """As :func:`find_active_token`; raises ``sqlite3.Error`` when it cannot read."""
        row = self._connection.execute(_DIRECT_SQL, (token_hash,)).fetchone()
        if row is None:
            return None
        # The raw driver hands back SQLAlchemy's stored text; the column holds UTC.
        expires = None if row[3] is None else datetime.fromisoformat(row[3]).replace(tzinfo=UTC)
        return ActiveToken(row[0], Role(row[1]), row[2], expires)

    def close(self) -> None:
        self._connection.close()


#: :data:`_ACTIVE_TOKEN` as SQLite text (positional parameter), compiled once.
_DIRECT_SQL = str(_ACTIVE_TOKEN.compile(dialect=sqlite.dialect()))
