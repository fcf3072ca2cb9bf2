"""The console's sign-in: a pasted token checked once, a server-side session in a cookie,
and CSRF checks on every POST.

The console does not use the bearer header (a browser cannot send it from a link), so its
routes are not guarded by the token gate. The sign-in form checks the pasted token with
the same functions the gate uses (the admin token compared in constant time, an issued
token looked up by its hash); worker tokens are refused: the console is for people. The
cookie then holds a random session id, never the token: the database keeps the id's hash
(app/db/console_sessions.py, shared by every API process), and each page looks it up
again, so signing out, revoking the token, or changing the admin token ends the session
at once.

The cookie is HttpOnly (scripts cannot read it), SameSite=Strict (no other site's
page sends it) and Secure when the console is served over https. A state-changing form
carries a per-session random token in a hidden field that must equal the one in the
session's CSRF cookie, and its Origin (or, without one, its Referer) must be the console's
own: either check alone refuses a forged POST.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qs

from fastapi import Request, Response
from sqlalchemy.orm import Session

from app.api.auth import Principal, admin_principal, stored_principal
from app.db import console_sessions
from app.db.base import utcnow
from app.db.models import Role
from app.db.tokens import hash_token

SESSION_COOKIE = "jobmatch_console"
CSRF_COOKIE = "jobmatch_console_csrf"
CSRF_FIELD = "csrf"

#: How long a sign-in lasts, in seconds, in the browser and in the database (it ends
#: sooner at sign-out or when its token is revoked: every page looks it up again).
SESSION_SECONDS = 12 * 3600

#: The longest token the sign-in form accepts; issued tokens are far shorter.
MAX_TOKEN_LENGTH = 512


@dataclass(frozen=True)
class Viewer:
    """Who looks at the console: the token's principal and the session's CSRF token."""

    principal: Principal
    csrf: str

    @property
    def is_admin(self) -> bool:
        return self.principal.role is Role.ADMIN

    @property
    def submitter(self) -> str | None:
        """The submitter whose jobs alone are shown; None for an admin, who sees all."""
        return None if self.is_admin else self.principal.subject


def principal_for_token(request: Request, session: Session, token: str) -> Principal | None:
    """The admin or submitter the token stands for; None for an unknown, revoked or
    worker token."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    principal = admin_principal(token, request.app.state.settings.admin_token)
    if principal is None:
        principal = stored_principal(session, hash_token(token))
    if principal is None or principal.role is Role.WORKER or principal.expired(utcnow()):
        return None
    return principal


def _admin_token(request: Request) -> str | None:
    configured = request.app.state.settings.admin_token
    return None if configured is None else str(configured.get_secret_value())


def current_viewer(request: Request, session: Session) -> Viewer | None:
    """The signed-in viewer, None when the cookies hold no live session: an unknown,
    expired or ended one, one whose issued token was revoked, expired or is a worker's, or
    one of an admin token that is no longer the configured one."""
    session_id = request.cookies.get(SESSION_COOKIE)
    csrf = request.cookies.get(CSRF_COOKIE)
    if not session_id or not csrf or len(session_id) > MAX_TOKEN_LENGTH:
        return None
    now = utcnow()
    owner = console_sessions.find_session(session, session_id, now)
    if owner is None:
        return None
    if owner.token_id is None:
        admin_token = _admin_token(request)
        fingerprint = owner.admin_fingerprint or ""
        if admin_token is None or not hmac.compare_digest(
            fingerprint, console_sessions.admin_fingerprint(session_id, admin_token)
        ):
            return None
        return Viewer(Principal(role=Role.ADMIN, subject="admin"), csrf)
    assert owner.role is not None and owner.subject is not None  # an issued token's session
    principal = Principal(
        role=owner.role,
        subject=owner.subject,
        token_id=owner.token_id,
        expires_at=owner.token_expires_at,
    )
    if principal.role is Role.WORKER or principal.expired(now):
        return None
    return Viewer(principal, csrf)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def start_session(
    request: Request, response: Response, session: Session, principal: Principal
) -> None:
    """Store a session for the signed-in principal and set its cookie and the CSRF
    cookie. ``principal`` without a token id is the admin token's. A session this browser
    still held ends: a new sign-in replaces it rather than leaving it to its expiry."""
    previous = request.cookies.get(SESSION_COOKIE)
    if previous and len(previous) <= MAX_TOKEN_LENGTH:
        console_sessions.end_session(session, previous)
    session_id = console_sessions.create_session(
        session,
        token_id=principal.token_id,
        admin_token=_admin_token(request) if principal.token_id is None else None,
        now=utcnow(),
        lifetime=timedelta(seconds=SESSION_SECONDS),
    )
    for name, value in ((SESSION_COOKIE, session_id), (CSRF_COOKIE, secrets.token_urlsafe(32))):
        response.set_cookie(
            name,
            value,
            max_age=SESSION_SECONDS,
            path="/ui",
            secure=_secure(request),
            httponly=True,
            samesite="strict",
        )


def end_session(request: Request, response: Response, session: Session) -> None:
    """Delete the cookie's session from the database and the cookies from the browser."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id and len(session_id) <= MAX_TOKEN_LENGTH:
        console_sessions.end_session(session, session_id)
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(
            name, path="/ui", secure=_secure(request), httponly=True, samesite="strict"
        )


#: The most fields a console form may carry; its own forms send two.
MAX_FORM_FIELDS = 20


class BadFormError(Exception):
    """A console form's body is not what a console form sends (more fields than any of
    them has); nothing is done with it."""


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a url-encoded form body (the first value of each). The body limits of
    app/api/body_limits.py apply before a byte is read."""
    if request.method != "POST":
        return {}
    body = (await request.body()).decode("utf-8", "replace")
    try:
        fields = parse_qs(body, max_num_fields=MAX_FORM_FIELDS)
    except ValueError as too_many:
        raise BadFormError(f"a console form has at most {MAX_FORM_FIELDS} fields") from too_many
    return {name: values[0] for name, values in fields.items()}


def same_origin(request: Request) -> bool:
    """Whether the POST comes from a page of this console: its Origin header, or its
    Referer when a browser sent no Origin, names this scheme, host and port. Neither:
    refused, as a forged request could be sent without them."""
    own = f"{request.url.scheme}://{request.url.netloc}"
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == own
    referer = request.headers.get("referer")
    return referer is not None and (referer == own or referer.startswith(own + "/"))


def csrf_ok(request: Request, viewer: Viewer, fields: dict[str, str]) -> bool:
    """Whether a state-changing form carries the session's CSRF token and comes from here."""
    sent = fields.get(CSRF_FIELD, "")
    return same_origin(request) and hmac.compare_digest(
        sent.encode("utf-8"), viewer.csrf.encode("utf-8")
    )
