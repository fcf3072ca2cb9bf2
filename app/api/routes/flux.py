"""Flux notation tools: expand an RFC 46 shape, compile RFC 35 text, validate RFC 31."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.auth import PrincipalDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.flux import ConstraintIn, ConstraintOut, RequiresIn, ShapeIn, ShapeOut
from app.matching.flux import tools as flux_tools

router = APIRouter(prefix="/v1/flux", tags=["flux"], route_class=RetryingRoute)


@router.post(
    "/shape",
    response_model=ShapeOut,
    operation_id="expand_shape",
    summary="Expand an RFC 46 shape into RFC 14 resources",
    responses={
        200: {"content": {"application/yaml": {}}, "description": "the expansion"},
        **errors(401, 503, *BODY_ERRORS),
    },
)
def expand_shape(body: ShapeIn, _who: PrincipalDep) -> ShapeOut | Response:
    """Expand a shape into RFC 14 resources (JSON, or YAML with `format: yaml`), with
    the shape's canonical text. Stores nothing."""
    if body.format == "yaml":
        return Response(
            flux_tools.shape_as_yaml(body.shape, body.default_label), media_type="application/yaml"
        )
    resources, canonical = flux_tools.expand_shape(body.shape, body.default_label)
    return ShapeOut(shape=canonical, resources=resources)


@router.post(
    "/requires",
    operation_id="compile_requires",
    summary="Compile RFC 35 text to an RFC 31 constraint",
    responses=errors(401, 503, *BODY_ERRORS),
)
def compile_requires(body: RequiresIn, _who: PrincipalDep) -> ConstraintOut:
    """Compile RFC 35 text to an RFC 31 constraint, as `flux submit --requires` does.
    Stores nothing."""
    return ConstraintOut(constraint=flux_tools.compile_requires_text(body.requires))


@router.post(
    "/constraint",
    operation_id="validate_constraint",
    summary="Validate an RFC 31 constraint",
    responses=errors(401, 503, *BODY_ERRORS),
)
def validate_constraint(body: ConstraintIn, _who: PrincipalDep) -> ConstraintOut:
    """Validate an RFC 31 constraint and return its canonical form (422 naming the
    operator or value that is wrong). Stores nothing."""
    return ConstraintOut(constraint=flux_tools.validate_constraint(body.constraint))
