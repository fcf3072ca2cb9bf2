"""A category's Grid Engine ``-l`` requests as rows of category_requests, normalised as
attribute values are (numbers in base units, strings compiled to a regex for SQL)."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.orm import Session

from app.db.models import CategoryRequest
from app.matching.gridengine.table import attribute_ids, load_table
from app.notations.gridengine.requests import RequestList
from app.notations.gridengine.string_regex import request_regex
from app.notations.gridengine.strings import StringExpressionError


def store_category_requests(
    session: Session, category_id: int, hard: RequestList, soft: RequestList
) -> None:
    if not hard.requests and not soft.requests:
        return
    table = load_table(session)
    ids = attribute_ids(session)
    rows = []
    for requests in (hard, soft):
        for request in requests:
            definition = table[request.name]
            regex = None
            if definition.type.is_string:
                try:
                    regex = request_regex(definition.type, request.value)
                except StringExpressionError:
                    # Only soft requests get here (hard ones are checked at submission);
                    # they are evaluated in Python, where == never and != always matches.
                    regex = None
            rows.append(
                {
                    "category_id": category_id,
                    "attribute_id": ids[request.name],
                    "soft": requests.soft,
                    "text": request.value,
                    "number": request.parsed if isinstance(request.parsed, float) else None,
                    "regex": regex,
                }
            )
    session.execute(insert(CategoryRequest), rows)
