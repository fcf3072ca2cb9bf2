"""Bodies of the stateless Flux routes: shapes, RFC 35 requires and RFC 31 constraints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Text


class ShapeIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"shape": "slot=4/node"},
                {"shape": "slot=4{nodelevel}/node{-x}/socket=2+/core=4+", "format": "yaml"},
            ]
        },
    )

    shape: Text = Field(max_length=65_536, description="RFC 46 shape, e.g. `slot=4/node`")
    default_label: Text = Field(
        default="default",
        min_length=1,
        max_length=255,
        description="the label a lone unlabelled `slot` gets (RFC 46)",
    )
    format: Literal["json", "yaml"] = Field(
        default="json", description="`yaml` answers the resources as application/yaml"
    )


class ShapeOut(BaseModel):
    shape: str = Field(description="the canonical shape string")
    resources: list[Any] = Field(description="the RFC 14 resources list")


class RequiresIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"requires": "host:node[0-1] ssd"}]}
    )

    requires: Text = Field(max_length=65_536, description="RFC 35 text, as flux --requires")


class ConstraintIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"constraint": {"and": [{"properties": ["ssd"]}, {"not": [{"ranks": ["4-7"]}]}]}}
            ]
        },
    )

    constraint: Any = Field(description="an RFC 31 constraint object")


class ConstraintOut(BaseModel):
    constraint: dict[str, Any] = Field(description="the canonical RFC 31 object")
