"""Stateless Flux helpers served over HTTP and the CLI: expand a shape, compile RFC 35
text, validate an RFC 31 constraint. They store nothing."""

from __future__ import annotations

from typing import Any

from app.matching.errors import InvalidFieldError
from app.notations.errors import NotationError
from app.notations.flux import jobspec as rfc14
from app.notations.flux.constraints import constraint_to_json, parse_constraint
from app.notations.flux.requires import compile_requires
from app.notations.flux.shape import format_shape, parse_shape_resources


def expand_shape(shape: str, default_label: str = "default") -> tuple[list[Any], str]:
    """The RFC 14 resources list of a shape, and the shape's canonical form."""
    try:
        resources = parse_shape_resources(shape, default_label)
        return rfc14.resources_to_json(resources), format_shape(resources, default_label)
    except NotationError as error:
        raise InvalidFieldError("shape", str(error), error) from error


def shape_as_yaml(shape: str, default_label: str = "default") -> str:
    try:
        return rfc14.dump_resources_yaml(parse_shape_resources(shape, default_label))
    except NotationError as error:
        raise InvalidFieldError("shape", str(error), error) from error


def compile_requires_text(requires: str) -> dict[str, Any]:
    """RFC 35 text compiled with flux's --requires conventions, validated as RFC 31."""
    try:
        return constraint_to_json(parse_constraint(compile_requires(requires)))
    except NotationError as error:
        raise InvalidFieldError("requires", str(error), error) from error


def validate_constraint(constraint: object) -> dict[str, Any]:
    """The canonical form of a valid RFC 31 constraint."""
    try:
        return constraint_to_json(parse_constraint(constraint))
    except NotationError as error:
        raise InvalidFieldError("constraint", str(error), error) from error
