"""Bodies of the token routes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.common import PATTERN_WORDS, BodyInt, Text
from app.db.models import Role

SUBJECT_PATTERN = r"^[A-Za-z0-9._@:-]+$"
PATTERN_WORDS[SUBJECT_PATTERN] = "a name of letters, digits and '.', '_', '@', ':', '-'"

#: The longest lifetime a token can be given in seconds (ten years).
MAX_LIFETIME_SECONDS = 10 * 366 * 86_400


class TokenCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"role": "worker", "subject": "w1", "label": "agent on w1"},
                {"role": "submitter", "subject": "ci", "label": "the CI pipeline"},
                {
                    "role": "submitter",
                    "subject": "nightly",
                    "label": "for one month",
                    "expires_in_seconds": 2_592_000,
                },
            ]
        },
    )

    role: Literal[Role.WORKER, Role.SUBMITTER] = Field(
        description="worker or submitter; the admin token is set in settings, never issued"
    )
    subject: str = Field(
        min_length=1,
        max_length=255,
        pattern=SUBJECT_PATTERN,
        description="the worker or submitter name the token acts for",
    )
    label: Text = Field(default="", max_length=255, description="a note, e.g. where it is used")
    expires_at: AwareDatetime | None = Field(
        default=None,
        description="when the token stops working (ISO 8601 with a time zone, in the future); "
        "null or absent: never, unless expires_in_seconds says",
    )
    expires_in_seconds: BodyInt | None = Field(
        default=None,
        ge=1,
        le=MAX_LIFETIME_SECONDS,
        description="the token stops working this many seconds after it is issued "
        "(instead of expires_at)",
    )

    @model_validator(mode="after")
    def _one_expiry(self) -> TokenCreate:
        if self.expires_at is not None and self.expires_in_seconds is not None:
            raise ValueError("give expires_at or expires_in_seconds, not both")
        return self

    def expiry(self, now: datetime) -> datetime | None:
        """When the token expires, issued at ``now``; None: never."""
        if self.expires_in_seconds is not None:
            return now + timedelta(seconds=self.expires_in_seconds)
        return self.expires_at


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int = Field(description="the token's id, to revoke it")
    role: Role = Field(description="worker or submitter")
    subject: str = Field(description="the worker or submitter name the token acts for")
    label: str = Field(description="the note given when it was issued")
    created_at: datetime = Field(description="when it was issued")
    revoked_at: datetime | None = Field(description="when it was revoked; null while it works")
    expires_at: datetime | None = Field(
        description="when it stops (or stopped) working; null: never"
    )
    last_used_at: datetime | None = Field(
        description="when a request last presented it, to within the server's "
        "JOBMATCH_TOKEN_LAST_USE_SECONDS (5 minutes by default); null: never used",
    )


class IssuedToken(TokenOut):
    token: str = Field(description="the bearer token; shown only in this response")
