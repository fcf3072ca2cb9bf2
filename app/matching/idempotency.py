"""Idempotent submission: the same key and body give the same job; the same key with
another body is refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import IdempotencyKey, Job
from app.matching.errors import InvalidFieldError

MAX_KEY_LENGTH = 255


def request_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def submit_once(
    session: Session,
    *,
    submitter: str,
    key: str,
    body: dict[str, Any],
    submit: Callable[[], Job],
) -> tuple[Job, bool]:
    """The job for this key: a new one from ``submit``, or the one an earlier request with
    the same key and body made (then the second value is True, "replayed")."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidFieldError(
            "Idempotency-Key",
            f"must be 1 to {MAX_KEY_LENGTH} printable characters",
            location="header",
        )
    digest = request_hash(body)
    existing = session.scalar(
        select(IdempotencyKey).where(
            IdempotencyKey.submitter == submitter, IdempotencyKey.key == key
        )
    )
    if existing is None:
        job = submit()
        try:
            # Two concurrent first uses of one key meet at the unique constraint.
            with session.begin_nested():
                session.add(
                    IdempotencyKey(submitter=submitter, key=key, request_hash=digest, job_id=job.id)
                )
                session.flush()
            return job, False
        except IntegrityError:
            existing = session.scalar(
                select(IdempotencyKey).where(
                    IdempotencyKey.submitter == submitter, IdempotencyKey.key == key
                )
            )
            if existing is None:
                raise
            # The other request won: this transaction's job must not be stored.
            session.delete(job)
            session.flush()
    if existing.request_hash != digest:
        raise InvalidFieldError(
            "Idempotency-Key",
            f"key {key!r} was already used with a different request body",
            location="header",
        )
    original = session.get(Job, existing.job_id)
    assert original is not None  # the foreign key guarantees it
    return original, True
