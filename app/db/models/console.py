"""Sign-ins to the web console, kept server-side so every API process sees them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class ConsoleSession(Base):
    """A browser signed in to the console. The cookie holds a random session id; only its
    SHA-256 is stored, so a copy of the table opens no console. A session made from an
    issued token names it (and goes with it: revoking the token ends its sessions); one
    made from the admin token of the settings holds a keyed fingerprint of that token
    instead, so that changing JOBMATCH_ADMIN_TOKEN ends them."""

    __tablename__ = "console_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: SHA-256 of the session id in the cookie (256 random bits: a fast hash is enough).
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: The issued token the session was made from; NULL for the admin token.
    token_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="CASCADE"), default=None, index=True
    )
    #: HMAC-SHA-256 of the admin token keyed with the session id (NULL for an issued
    #: token): a session of an admin token that was changed since no longer matches, and
    #: without the cookie's id the column tells nothing about the token.
    admin_fingerprint: Mapped[str | None] = mapped_column(String(64), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: After this the session is refused, and the next sign-in deletes it.
    expires_at: Mapped[datetime] = mapped_column(index=True)
