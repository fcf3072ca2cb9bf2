"""A job's request, parsed and validated as a whole before anything is stored.

Every notation a job may carry is parsed here; the first invalid field raises
InvalidFieldError naming the field, so a submission either stores everything or nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.matching.errors import InvalidFieldError
from app.matching.tag_rows import parse_resources
from app.notations import jobspec as rfc14
from app.notations.constraints import Constraint, constraint_to_json, parse_constraint
from app.notations.errors import NotationError
from app.notations.requires import compile_requires_constraint
from app.notations.shape import parse_shape_resources
from app.notations.tags import Resources

PRIORITY_RANGE = (-1_000_000, 1_000_000)


@dataclass(frozen=True)
class JobSpec:
    """What a submitter sends. ``constraint`` (RFC 31 object) and ``requires`` (RFC 35
    text) are alternatives, and so are ``shape`` (RFC 46) and ``jobspec`` (RFC 14 list)."""

    resources: str = ""
    priority: int = 0
    slots: int = 1
    constraint: dict[str, Any] | None = None
    requires: str | None = None
    shape: str | None = None
    jobspec: list[Any] | None = None


@dataclass(frozen=True)
class ParsedRequest:
    tags: Resources
    slots: int
    constraint: Constraint | None
    jobspec: rfc14.Resources | None

    @property
    def constraint_json(self) -> str | None:
        if self.constraint is None:
            return None
        return json.dumps(
            constraint_to_json(self.constraint), sort_keys=True, separators=(",", ":")
        )

    @property
    def jobspec_json(self) -> str | None:
        if self.jobspec is None:
            return None
        return json.dumps(
            rfc14.resources_to_json(self.jobspec), sort_keys=True, separators=(",", ":")
        )


def _field(field: str, error: NotationError) -> InvalidFieldError:
    return InvalidFieldError(field, str(error), error)


def parse_request(spec: JobSpec) -> ParsedRequest:
    """Parse every notation of the job; raise InvalidFieldError for the first bad field."""
    tags = parse_resources(spec.resources)
    if spec.slots < 1:
        raise InvalidFieldError("slots", "a job needs at least one slot")
    low, high = PRIORITY_RANGE
    if not low <= spec.priority <= high:
        raise InvalidFieldError("priority", f"must be between {low} and {high}")
    if spec.constraint is not None and spec.requires is not None:
        raise InvalidFieldError(
            "requires", "give either constraint (RFC 31) or requires (RFC 35 text), not both"
        )
    if spec.shape is not None and spec.jobspec is not None:
        raise InvalidFieldError(
            "jobspec", "give either shape (RFC 46) or jobspec (RFC 14), not both"
        )
    constraint = None
    if spec.constraint is not None:
        try:
            constraint = parse_constraint(spec.constraint)
        except NotationError as error:
            raise _field("constraint", error) from error
    elif spec.requires is not None:
        try:
            constraint = compile_requires_constraint(spec.requires)
        except NotationError as error:
            raise _field("requires", error) from error
    resources = None
    if spec.shape is not None:
        try:
            resources = parse_shape_resources(spec.shape)
        except NotationError as error:
            raise _field("shape", error) from error
    elif spec.jobspec is not None:
        try:
            resources = rfc14.validate_resources(spec.jobspec)
        except NotationError as error:
            raise _field("jobspec", error) from error
    return ParsedRequest(tags=tags, slots=spec.slots, constraint=constraint, jobspec=resources)
