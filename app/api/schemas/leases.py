"""Bodies of the lease routes."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ExpireOut(BaseModel):
    expired: int = Field(description="running jobs requeued (or failed) by this sweep")
