"""Flux notation tools: expand an RFC 46 shape, compile RFC 35 text, validate RFC 31."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.auth import PrincipalDep
from app.api.retries import RetryingRoute
from app.api.schemas.flux import ConstraintIn, ConstraintOut, RequiresIn, ShapeIn, ShapeOut
from app.matching.flux import tools as flux_tools

router = APIRouter(prefix="/v1/flux", tags=["flux"], route_class=RetryingRoute)


@router.post(
    "/shape",
    response_model=ShapeOut,
    responses={200: {"content": {"application/yaml": {}}, "description": "the expansion"}},
)
def expand_shape(body: ShapeIn, _who: PrincipalDep) -> ShapeOut | Response:
    """Expand a shape into RFC 14 resources (JSON, or YAML with `format: yaml`)."""
    if body.format == "yaml":
        return Response(
            flux_tools.shape_as_yaml(body.shape, body.default_label), media_type="application/yaml"
        )
    resources, canonical = flux_tools.expand_shape(body.shape, body.default_label)
    return ShapeOut(shape=canonical, resources=resources)


@router.post("/requires", response_model=ConstraintOut)
def compile_requires(body: RequiresIn, _who: PrincipalDep) -> ConstraintOut:
    """Compile RFC 35 text to an RFC 31 constraint, as `flux submit --requires` does."""
    return ConstraintOut(constraint=flux_tools.compile_requires_text(body.requires))


@router.post("/constraint", response_model=ConstraintOut)
def validate_constraint(body: ConstraintIn, _who: PrincipalDep) -> ConstraintOut:
    """Validate an RFC 31 constraint and return its canonical form."""
    return ConstraintOut(constraint=flux_tools.validate_constraint(body.constraint))
