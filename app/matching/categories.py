"""Job categories: equal requests share one row, its tag rows and its cached misfits."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import exists, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import Category, CategoryTag, Worker
from app.matching.allocation import build_requests
from app.matching.constraint_sql import store_constraint_rows
from app.matching.inventory import store_category_needs
from app.matching.misfits import cache_category_misfits, fits
from app.matching.requests import ParsedRequest
from app.matching.resource_rows import store_resource_vertices
from app.matching.tag_rows import canonical_resources, tag_rows


def category_key(request: ParsedRequest) -> str:
    """Canonical JSON of everything a job asks for; equal keys mean equal matching."""
    return json.dumps(
        {
            "resources": canonical_resources(request.tags),
            "slots": request.slots,
            "constraint": request.constraint_json,
            "jobspec": request.jobspec_json,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def get_or_create_category(session: Session, request: ParsedRequest) -> Category:
    key = category_key(request)
    key_hash = hashlib.sha256(key.encode("utf-8")).hexdigest()
    category = session.scalar(select(Category).where(Category.key_hash == key_hash))
    if category is not None:
        return category
    try:
        # A concurrent submission of the same new request may win the unique key; then
        # this savepoint is rolled back and its row is used instead.
        with session.begin_nested():
            category = Category(
                key_hash=key_hash,
                key=key,
                resources=canonical_resources(request.tags),
                slots=request.slots,
                constraint=request.constraint_json,
                jobspec=request.jobspec_json,
            )
            session.add(category)
            session.flush()
    except IntegrityError:
        existing = session.scalar(select(Category).where(Category.key_hash == key_hash))
        if existing is None:
            raise
        return existing
    rows = [
        {"category_id": category.id, "group_name": g, "value": v, "mode": m}
        for g, v, m in tag_rows(request.tags)
    ]
    if rows:
        session.execute(insert(CategoryTag), rows)
    if request.constraint is not None:
        store_constraint_rows(session, category.id, request.constraint)
    if request.jobspec is not None:
        store_resource_vertices(session, category.id, request.jobspec)
        store_category_needs(session, category.id, build_requests(request.jobspec))
    cache_category_misfits(session, category)
    return category


def any_worker_fits(session: Session, category_id: int) -> bool:
    """Whether some registered worker could run the category's jobs, whatever runs now."""
    return bool(
        session.scalar(
            select(exists(select(Worker.id).where(fits(category_id, Worker.id, Worker.generation))))
        )
    )
