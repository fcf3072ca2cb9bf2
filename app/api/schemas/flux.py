"""Bodies of the stateless Flux routes: shapes, RFC 35 requires and RFC 31 constraints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Text


class ShapeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    shape: Text = Field(max_length=65_536, description="RFC 46 shape, e.g. `slot=4/node`")
    default_label: Text = Field(default="default", min_length=1, max_length=255)
    format: Literal["json", "yaml"] = "json"


class ShapeOut(BaseModel):
    shape: str = Field(description="the canonical shape string")
    resources: list[Any] = Field(description="the RFC 14 resources list")


class RequiresIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requires: Text = Field(max_length=65_536, description="RFC 35 text, as flux --requires")


class ConstraintIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    constraint: Any = Field(description="an RFC 31 constraint object")


class ConstraintOut(BaseModel):
    constraint: dict[str, Any] = Field(description="the canonical RFC 31 object")
