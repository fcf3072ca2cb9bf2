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
    model_config = ConfigDict(extra="forbid")

    role: Literal[Role.WORKER, Role.SUBMITTER] = Field(
        description="worker or submitter; the admin token is set in settings, never issued"
    )
    subject: str = Field(
        min_length=1,
        max_length=255,
        pattern=SUBJECT_PATTERN,
        description="the worker or submitter name the token acts for",
    )
    label: Text = Field(default="", max_length=255)


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    role: Role
    subject: str
    label: str
    created_at: datetime
    revoked_at: datetime | None


class IssuedToken(TokenOut):
    token: str = Field(description="the bearer token; shown only in this response")
