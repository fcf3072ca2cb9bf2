"""Bearer tokens, stored only as hashes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow
from app.db.models.enums import string_enum
from app.wire.states import Role as Role


class ApiToken(Base):
    """An issued token. ``subject`` names the worker (or submitter) the token acts for."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: SHA-256 of the token. Tokens are 256 random bits, so a fast hash is enough: there is
    #: nothing to brute-force, and lookup by hash keeps the comparison out of Python.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[Role] = mapped_column(string_enum(Role, "token_role"))
    subject: Mapped[str] = mapped_column(String(255), index=True)
    label: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    #: After this the token is refused (401, saying it expired); None: it never expires.
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    #: When a request last presented it, to within JOBMATCH_TOKEN_LAST_USE_SECONDS: each
    #: process records a token's use at most once per that interval (app/db/tokens.py).
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
