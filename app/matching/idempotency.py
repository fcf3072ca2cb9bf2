"""Idempotent submission: the same key and body give the same job (or, for a bulk
submission, the same jobs); the same key with another body is refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import BulkIdempotencyKey, IdempotencyKey, Job
from app.matching.errors import InvalidFieldError
from app.notations.flux.idset import IdSet, parse_idset

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
    _check_key(key)
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
    _check_same_body(existing.request_hash, digest, key)
    original = session.get(Job, existing.job_id)
    assert original is not None  # the foreign key guarantees it
    return original, True


def _check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidFieldError(
            "Idempotency-Key",
            f"must be 1 to {MAX_KEY_LENGTH} printable characters",
            location="header",
        )


def _check_same_body(stored: str, digest: str, key: str) -> None:
    if stored != digest:
        raise InvalidFieldError(
            "Idempotency-Key",
            f"key {key!r} was already used with a different request body",
            location="header",
        )


@dataclass(frozen=True)
class BulkClaim:
    """An Idempotency-Key of a bulk submission, claimed by this request (``replayed``
    None: submit, then :func:`record_bulk_jobs`) or used before with the same body
    (``replayed``: the ids of the jobs that request stored, in its answer's order)."""

    row: BulkIdempotencyKey
    replayed: list[int] | None


def claim_bulk_key(
    session: Session, *, submitter: str, key: str, body: dict[str, Any]
) -> BulkClaim:
    """Claim ``key`` for a bulk submission of ``body``, or find the jobs an earlier use of
    it stored (a 422 when that use's body was another).

    The key is claimed before anything is submitted, not after as for one job: two
    concurrent first uses meet at the key's unique constraint before either stores a job
    (on PostgreSQL the second waits there for the first to end), so the loser has no
    thousand jobs to take back. A refused body stores nothing, its claim included: its
    transaction is rolled back and the key is free again."""
    _check_key(key)
    digest = request_hash(body)
    existing = _bulk_key(session, submitter, key)
    if existing is None:
        claim = BulkIdempotencyKey(submitter=submitter, key=key, request_hash=digest)
        try:
            with session.begin_nested():
                session.add(claim)
                session.flush()
            return BulkClaim(claim, None)
        except IntegrityError:
            existing = _bulk_key(session, submitter, key)
            if existing is None:
                raise
    _check_same_body(existing.request_hash, digest, key)
    assert existing.job_ids is not None  # set in the transaction that claimed it
    return BulkClaim(existing, list(parse_idset(existing.job_ids)))


def record_bulk_jobs(session: Session, claim: BulkClaim, job_ids: Sequence[int]) -> None:
    """Keep the ids of the jobs the claiming request stored, under its key. They ascend
    in the answer's order (app/matching/submission/bulk.py), which the idset, a sorted
    set, keeps."""
    ids = list(job_ids)
    assert ids == sorted(ids)
    claim.row.job_ids = IdSet.from_ids(ids).encode()
    session.flush()


def _bulk_key(session: Session, submitter: str, key: str) -> BulkIdempotencyKey | None:
    return session.scalar(
        select(BulkIdempotencyKey).where(
            BulkIdempotencyKey.submitter == submitter, BulkIdempotencyKey.key == key
        )
    )
