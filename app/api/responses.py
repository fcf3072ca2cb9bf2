"""The error responses an operation documents, built per route from the statuses it can
really return (issue 21: every operation used to list the same seven, /healthz included).

Which status applies where:

* 401: the route needs a token (the token gate answers before the route runs);
* 429: the same routes: the token gate refuses a token over its rate limit
  (app/api/rate_limits.py), so ``errors`` adds it wherever 401 is;
* 403: the route checks the token's role or the worker it belongs to;
* 404: the route looks up a resource named in its path;
* 408 and 413: the route reads a request body (app/api/body_limits.py);
* 409: the change can contradict the current state or lose a race on a unique name;
* 422: the route has parameters or a body to validate (a body that is not UTF-8 JSON too);
* 503: the route (or the token gate, looking up an issued token) touches the database.

A route lists them in its decorator, ``responses=errors(401, 403, 404, 422, 503)``;
tests/api/test_openapi.py holds the lists to these rules and schemathesis holds the answers
to the lists.
"""

from __future__ import annotations

from typing import Any

from app.api.schemas.common import Problem

#: What each error status means, as the OpenAPI document says it.
PROBLEM_DESCRIPTIONS: dict[int, str] = {
    401: "No bearer token, or an unknown or revoked one (`WWW-Authenticate: Bearer`)",
    403: "The token is valid, but its role (or the worker it belongs to) may not do this",
    404: "Nothing of that name or id exists",
    408: "The request body arrived too slowly (JOBMATCH_BODY_TIMEOUT_SECONDS)",
    409: "The request contradicts the current state; the detail says how",
    413: "The request body is over the size limit (JOBMATCH_MAX_BODY_BYTES)",
    422: "Invalid request: a parameter, a field or a notation, or a body that is not UTF-8 "
    "JSON; `errors` names each field with, for a notation, its position and what was expected",
    429: "Too many requests with this token (JOBMATCH_RATE_LIMIT_PER_SECOND per server "
    "process); retry after the `Retry-After` seconds",
    503: "The database is busy or unreachable; retry after the `Retry-After` seconds",
}

#: Statuses of a route that reads a JSON body: it can arrive too slowly, be too large or
#: be invalid.
BODY_ERRORS = (408, 413, 422)


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route decorator documenting these error statuses, each as an
    application/problem+json body (app/api/problems.py install_problem_openapi sets the
    media type)."""
    unknown = sorted(set(statuses) - set(PROBLEM_DESCRIPTIONS))
    if unknown:
        raise ValueError(f"no description for error statuses {unknown}")
    documented = set(statuses) | ({429} if 401 in statuses else set())
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": Problem, "description": PROBLEM_DESCRIPTIONS[status]}
        for status in sorted(documented)
    }
    if 429 in responses:
        responses[429]["headers"] = {"Retry-After": RETRY_AFTER}
    return responses


#: The Retry-After header of a 429, as the OpenAPI document describes it.
RETRY_AFTER = {
    "description": "whole seconds until the token may make a request again",
    "schema": {"type": "integer", "minimum": 1},
}
