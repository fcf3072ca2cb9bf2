"""Pydantic bodies shared by several routers (pagination envelopes and the like)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Generic, TypeVar

from fastapi import Path, Query
from pydantic import BaseModel, Field, Strict

from app.db.models import WorkerState

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """A page of a listing: the items, and the limit/offset that produced them."""

    items: list[T] = Field(description="the items of this page, in the listing's order")
    limit: int = Field(description="the page size asked for (the `limit` parameter)")
    offset: int = Field(description="how many items were skipped (the `offset` parameter)")
    next_offset: int | None = Field(description="offset of the next page; null on the last one")


#: A number in a request body: a JSON number and nothing else. Pydantic's lax mode also
#: took ``true`` as 1 and ``"5"`` as 5, which the published schema does not allow (the
#: fuzz test sent ``"exit_code": false`` to a finish and it was accepted).
BodyInt = Annotated[int, Strict()]
BodyFloat = Annotated[float, Strict()]

#: Ids are 32-bit on PostgreSQL (INTEGER); a larger one can name nothing, so it is a 422
#: instead of reaching the database.
MAX_ID = 2**31 - 1
IdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="numeric id")]
#: Free text as the API accepts it: anything but NUL, which PostgreSQL cannot store in text.
TEXT_PATTERN = r"^[^\x00]*$"
Text = Annotated[str, Field(pattern=TEXT_PATTERN)]
LimitQuery = Annotated[int, Query(ge=1, le=500, description="page size")]

#: Every name a URL path carries (workers, hosts, queues, parallel environments,
#: attributes, tasks): the union of the characters their creation rules allow, checked
#: before any work, the same way on every database (issue 19: a 5,000-character PE name
#: with quotes was stored on SQLite). Grid Engine names (sge_types(1) "name") are letters,
#: digits and ``_.-``; host names add ``:@`` for the worker names this API allows.
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$"
MAX_NAME_LENGTH = 255
NamePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=NAME_PATTERN,
        description="a name: letters, digits and _.:@+-, at most 255 characters",
    ),
]
#: What each pattern of the API's fields asks for, in words: a 422 says these instead of
#: the raw regular expression (issue 21). Schema modules add theirs.
PATTERN_WORDS: dict[str, str] = {
    TEXT_PATTERN: "text without NUL characters",
    NAME_PATTERN: "a name of letters, digits and '_', '.', ':', '@', '+', '-' that starts "
    "with a letter, a digit or '_'",
}
OffsetQuery = Annotated[int, Query(ge=0, le=MAX_ID, description="items to skip")]
#: A name in a body that a URL path names too (a host, a queue, an attribute, a quota
#: set): the rules of NamePath; each field says what it names.
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)]

#: Fields of answers that mean the same wherever they stand, described once.
JobIdField = Annotated[int, Field(description="the job's id")]
WorkerNameField = Annotated[str, Field(description="the worker's name")]
WorkerStateField = Annotated[WorkerState, Field(description="the worker's state")]
RegisteredAt = Annotated[datetime, Field(description="when it was registered")]
ChangedAt = Annotated[datetime, Field(description="when it was last changed")]


class FieldProblem(BaseModel):
    """One entry of a 422 problem's ``errors``: which field is wrong and why."""

    field: str = Field(
        description="where: `body.<path>` (e.g. `body.resources`, `body.queues.0.name`), "
        "`body` for the body as a whole, `path.<name>`, `query.<name>` or `header.<name>`"
    )
    message: str = Field(description="what is wrong, in words")
    type: str | None = Field(
        default=None,
        description="a machine-readable kind of error (pydantic's, e.g. `missing`, "
        "`string_too_long`, `json_invalid`); absent for notation errors",
    )
    notation: str | None = Field(
        default=None,
        description="the notation that did not parse, e.g. `momotor-tags`, `rfc46-shape`, "
        "`sge-request`",
    )
    position: int | None = Field(
        default=None,
        description="0-based character position in the notation's text (or in the body, "
        "for JSON that does not parse) where the error was found",
    )
    expected: str | None = Field(
        default=None, description="what the notation expected at that position"
    )
    input: str | None = Field(default=None, description="the notation text that was refused")


class Problem(BaseModel):
    """RFC 9457 problem details, the body of every error response. Some problems add
    members of their own (a late finish report says which worker holds the job now)."""

    type: str = Field(
        default="about:blank",
        description="a URI naming the kind of problem; `about:blank` when the status says it",
    )
    title: str = Field(description="a short summary of the kind of problem")
    status: int = Field(description="the HTTP status code")
    detail: str = Field(description="what went wrong in this request, in words")
    instance: str | None = Field(default=None, description="the path of the request")
    errors: list[FieldProblem] | None = Field(
        default=None,
        description="422 only: every invalid field, parameter or notation of the request",
    )
