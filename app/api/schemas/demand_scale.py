"""Body of ``GET /v1/demand/scale`` (app/wire/demand_scale.py has its shape)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TemplateScaleOut(BaseModel):
    workers: int = Field(description="new workers of the template in the suggested mix")
    jobs: int = Field(description="waiting jobs they would start")


class DemandScaleOut(BaseModel):
    templates: dict[str, TemplateScaleOut] = Field(
        description="per worker template (by name): what the suggested mix adds of it"
    )
    jobs: dict[str, int] = Field(
        description="waiting jobs per answer (`never`, `capacity`, `policy`, `ready`) and "
        "`waiting` for all of them"
    )
    workers: int = Field(description="new workers in the suggested mix, in all")
    unrunnable: int = Field(
        description="waiting jobs that today's workers cannot start now and no template runs"
    )
    age_seconds: float = Field(description="seconds since these figures were computed")
