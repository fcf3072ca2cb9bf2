"""Bodies of the token routes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import PATTERN_WORDS, Text
from app.db.models import Role

SUBJECT_PATTERN = r"^[A-Za-z0-9._@:-]+$"
PATTERN_WORDS[SUBJECT_PATTERN] = "a name of letters, digits and '.', '_', '@', ':', '-'"


class TokenCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"role": "worker", "subject": "w1", "label": "agent on w1"},
                {"role": "submitter", "subject": "ci", "label": "the CI pipeline"},
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


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int = Field(description="the token's id, to revoke it")
    role: Role = Field(description="worker or submitter")
    subject: str = Field(description="the worker or submitter name the token acts for")
    label: str = Field(description="the note given when it was issued")
    created_at: datetime = Field(description="when it was issued")
    revoked_at: datetime | None = Field(description="when it was revoked; null while it works")


class IssuedToken(TokenOut):
    token: str = Field(description="the bearer token; shown only in this response")
