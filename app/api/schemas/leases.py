"""Bodies of the lease routes."""

from __future__ import annotations

from pydantic import BaseModel


class ExpireOut(BaseModel):
    expired: int
