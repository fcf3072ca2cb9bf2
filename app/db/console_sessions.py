"""The web console's sessions (SQL side): made at sign-in, looked up by every page, ended
at sign-out, with their token's revocation, or at their expiry.

The cookie carries a random session id (256 bits); the table keeps its SHA-256 only. A
session of an issued token is read joined to the token, so a revoked token's sessions
stop at once (and app.db.tokens.revoke_token deletes them with the revocation). A session
of the settings' admin token keeps an HMAC of that token keyed with the session id: when
JOBMATCH_ADMIN_TOKEN changes, the stored fingerprint no longer matches and the session is
refused; and without the cookie's id the column cannot be tested against guesses.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import ApiToken, ConsoleSession, Role
from app.db.tokens import hash_token


def admin_fingerprint(session_id: str, admin_token: str) -> str:
    """The admin token's HMAC-SHA-256, keyed with the session id."""
    return hmac.new(
        session_id.encode("utf-8"), admin_token.encode("utf-8"), hashlib.sha256
    ).hexdigest()


def create_session(
    session: Session,
    *,
    token_id: int | None,
    admin_token: str | None,
    now: datetime,
    lifetime: timedelta,
) -> str:
    """Store a new session of an issued token (``token_id``) or of the admin token
    (``admin_token``, exactly one of the two) and return its clear id, for the cookie.
    Expired sessions are deleted on the way: sign-ins are rare, so the table stays small
    without a sweeper."""
    if (token_id is None) == (admin_token is None):
        raise ValueError("a console session is made from an issued token or the admin token")
    delete_expired(session, now)
    session_id = secrets.token_urlsafe(32)
    session.add(
        ConsoleSession(
            session_hash=hash_token(session_id),
            token_id=token_id,
            admin_fingerprint=None
            if admin_token is None
            else admin_fingerprint(session_id, admin_token),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    session.flush()
    return session_id


class SessionOwner(NamedTuple):
    """Whose a live session is: an issued token's role, subject, id and expiry, or (all
    None but the fingerprint) the admin token's."""

    token_id: int | None
    role: Role | None
    subject: str | None
    token_expires_at: datetime | None
    admin_fingerprint: str | None


def find_session(session: Session, session_id: str, now: datetime) -> SessionOwner | None:
    """The owner of an unexpired session; None for an unknown or expired one, or one whose
    issued token was revoked. The admin fingerprint is the caller's to check."""
    row = session.execute(
        select(
            ConsoleSession.token_id,
            ApiToken.role,
            ApiToken.subject,
            ApiToken.expires_at,
            ApiToken.revoked_at,
            ConsoleSession.admin_fingerprint,
        )
        .outerjoin(ApiToken, ApiToken.id == ConsoleSession.token_id)
        .where(
            ConsoleSession.session_hash == hash_token(session_id),
            ConsoleSession.expires_at > now,
        )
    ).one_or_none()
    if row is None:
        return None
    token_id, role, subject, token_expires, revoked_at, fingerprint = row
    if token_id is not None and (role is None or revoked_at is not None):
        return None
    return SessionOwner(token_id, role, subject, token_expires, fingerprint)


def end_session(session: Session, session_id: str) -> None:
    """Delete the session (sign-out): its cookie opens nothing any more."""
    session.execute(
        delete(ConsoleSession).where(ConsoleSession.session_hash == hash_token(session_id))
    )


def delete_expired(session: Session, now: datetime) -> int:
    """Delete the sessions past their expiry; how many there were."""
    result = session.execute(delete(ConsoleSession).where(ConsoleSession.expires_at <= now))
    return int(getattr(result, "rowcount", 0) or 0)
