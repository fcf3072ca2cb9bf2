"""The misfit CASE is built from MISFIT_ORDER: the families' clause providers, in the
order of the reason codes documented in app/matching/misfits.py (Momotor's four NoMatch
cells first, then RFC 31, debusine's task clauses, slots, Grid Engine's hierarchy and the
inventory)."""

from __future__ import annotations

from sqlalchemy import Boolean, column
from sqlalchemy.dialects import postgresql, sqlite

from app.db.models import Category, Worker
from app.matching import misfits
from app.matching.gridengine.sql import Scope

DOCUMENTED_ORDER = [
    "job-requires-tag",
    "worker-excludes-tag",
    "job-excludes-tag",
    "worker-requires-tag",
    "constraint",
    "task-denied",
    "task-version",
    "task-requirements",
    "too-few-slots",
    "sge-global",
    "sge-host",
    "sge-queue",
    "sge-queue-unavailable",
    "needs-several-nodes",
    "inventory-too-small",
]


def test_reason_codes_follow_the_documented_order() -> None:
    assert list(misfits.REASONS) == DOCUMENTED_ORDER
    assert all(misfits.REASONS[code] for code in DOCUMENTED_ORDER)


def test_every_provider_contributes_whens_in_its_place() -> None:
    expression = misfits.misfit_reason(
        Category,
        Worker,
        Scope(category_id=1),
        column("constraint_ok", Boolean),
        column("requirements_ok", Boolean),
    )
    assert [result.value for _, result in expression.whens] == DOCUMENTED_ORDER  # type: ignore[attr-defined]
    for dialect in (postgresql.dialect(), sqlite.dialect()):
        compiled = expression.compile(dialect=dialect)
        bound = [value for value in compiled.params.values() if str(value) in misfits.REASONS]
        assert bound == DOCUMENTED_ORDER


def test_each_provider_declares_exactly_the_codes_it_emits() -> None:
    pair = misfits.MisfitPair(Category, Worker, "worker")
    for provider in misfits.MISFIT_ORDER:
        assert [code for _, code in provider.clauses(pair)] == list(provider.reasons)
