"""Job categories: equal requests share one row, its tag rows and its cached misfits."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import exists, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import Category, CategoryTag, Worker
from app.matching.misfits import cache_category_misfits, fits
from app.matching.tag_rows import canonical_resources, tag_rows
from app.notations.tags import Resources


def category_key(resources: Resources, slots: int) -> str:
    """Canonical JSON of everything a job asks for; equal keys mean equal matching."""
    return json.dumps(
        {"resources": canonical_resources(resources), "slots": slots},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def get_or_create_category(session: Session, resources: Resources, slots: int) -> Category:
    key = category_key(resources, slots)
    key_hash = hashlib.sha256(key.encode("utf-8")).hexdigest()
    category = session.scalar(select(Category).where(Category.key_hash == key_hash))
    if category is not None:
        return category
    try:
        # A concurrent submission of the same new request may win the unique key; then
        # this savepoint is rolled back and its row is used instead.
        with session.begin_nested():
            category = Category(
                key_hash=key_hash, key=key, resources=canonical_resources(resources), slots=slots
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
        for g, v, m in tag_rows(resources)
    ]
    if rows:
        session.execute(insert(CategoryTag), rows)
    cache_category_misfits(session, category.id)
    return category


def any_worker_fits(session: Session, category_id: int) -> bool:
    """Whether some registered worker could run the category's jobs, whatever runs now."""
    return bool(
        session.scalar(
            select(exists(select(Worker.id).where(fits(category_id, Worker.id, Worker.generation))))
        )
    )
