"""The misfit cache stays exact while workers change (issue 23): after any sequence of
worker registrations, updates of tags and slots, drains and deletions, interleaved with
submissions of new requests, every (category, worker) verdict the cache gives equals a
reference computed in Python from the stored definitions: Momotor's match table
(``explain.tag_clauses``, held to ``momotor.shared.resources`` by tests/notations) and the
largest queue instance (``explain.slot_clauses``), the first failing clause in the
documented order (app/matching/misfits.py) giving the code.

The cache is read the ways the engine reads it: ``v_category_fit`` (what users query in
SQL), ``category_fit`` (the API's per-worker list), ``misfits.fitting_workers`` (a
long-poll wake-up) and ``any_worker_fits`` (the submission's "No suitable worker found").
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import Category, Job, QueueInstance, Worker, WorkerState
from app.matching import misfits, submission
from app.matching.categories import any_worker_fits
from app.matching.category_fit import category_fit
from app.matching.explain import slot_clauses, tag_clauses
from app.matching.requests import JobSpec
from app.matching.worker_lifecycle import (
    WorkerChanges,
    delete_worker,
    register_worker,
    update_worker,
)
from app.matching.workers import WorkerSpec
from app.notations.momotor.resources import Resources
from tests.support.thoroughness import examples

TAGS = ("a", "b", "c")
WORKER_MODES = st.sampled_from(["", "?", "?", "~", "r"])
JOB_MODES = st.sampled_from(["", "", "r", "r", "?", "~"])
NAMES = st.sampled_from(["w0", "w1", "w2", "w3"])


def _resources(modes: tuple[str, ...]) -> str:
    """``tags: ?a, ~b, c``: the items of one group, ``r`` (required) written bare."""
    items = [
        ("" if mode == "r" else mode) + tag for mode, tag in zip(modes, TAGS, strict=True) if mode
    ]
    return f"tags: {', '.join(items)}" if items else ""


def _definition(modes: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(*(modes for _ in TAGS)).map(_resources)


ORDER = list(misfits.REASONS)
SLOTS = st.integers(min_value=1, max_value=3)
OPERATIONS = st.one_of(
    st.tuples(st.just("register"), NAMES, _definition(WORKER_MODES), SLOTS),
    st.tuples(st.just("retag"), NAMES, _definition(WORKER_MODES)),
    st.tuples(st.just("resize"), NAMES, SLOTS),
    st.tuples(st.just("drain"), NAMES),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("submit"), _definition(JOB_MODES), SLOTS),
)


def _apply(session: Session, operation: tuple[Any, ...]) -> None:
    kind = operation[0]
    if kind == "submit":
        _, resources, slots = operation
        submission.submit_job(session, JobSpec(resources=resources, slots=slots), submitter="t")
        return
    name = operation[1]
    exists = session.scalar(select(Worker.id).where(Worker.name == name)) is not None
    if kind == "register":
        _, _, resources, slots = operation
        # A name that exists is replaced whole (POST /v1/workers?replace=true).
        spec = WorkerSpec(name=name, resources=resources, slots=slots)
        register_worker(session, spec, by="t", replace=True)
    elif not exists:
        return
    elif kind == "retag":
        update_worker(session, name, WorkerChanges(resources=operation[2]), by="t")
    elif kind == "resize":
        update_worker(session, name, WorkerChanges(slots=operation[2]), by="t")
    elif kind == "drain":
        update_worker(session, name, WorkerChanges(state=WorkerState.DRAINING), by="t")
    else:
        delete_worker(session, name, requeue=True, by="t")


def _reference(session: Session) -> dict[tuple[int, str], str | None]:
    """The first failing static clause of every (category, worker), None when it fits,
    from the stored definitions alone."""
    largest = dict(
        session.execute(
            select(Worker.name, func.coalesce(func.max(QueueInstance.slots), 0))
            .outerjoin(QueueInstance, QueueInstance.worker_id == Worker.id)
            .group_by(Worker.name)
        ).all()
    )
    offered = {
        name: Resources.from_string(resources)
        for name, resources in session.execute(select(Worker.name, Worker.resources))
    }
    verdicts: dict[tuple[int, str], str | None] = {}
    for category_id, resources, slots in session.execute(
        select(Category.id, Category.resources, Category.slots)
    ):
        job = Resources.from_string(resources)
        for name, worker in offered.items():
            codes = {
                clause.reason
                for clause in (*tag_clauses(job, worker), *slot_clauses(slots, int(largest[name])))
            }
            # The cache keeps the first failing clause in the documented order.
            verdicts[(category_id, name)] = min(codes, key=ORDER.index) if codes else None
    return verdicts


def _view(session: Session) -> dict[tuple[int, str], str | None]:
    rows = session.execute(
        text("SELECT category_id, worker_name, fits, reason FROM v_category_fit")
    )
    verdicts = {}
    for category_id, name, fits, reason in rows:
        assert bool(fits) == (reason is None), (category_id, name, fits, reason)
        verdicts[(category_id, name)] = reason
    return verdicts


def _as_the_view_has_it(
    session: Session, expected: dict[tuple[int, str], str | None]
) -> dict[tuple[int, str], str | None]:
    """The reference as v_category_fit shows it: a fit-listing category's misfits carry
    the code ``not-listed`` there, since only its fits are stored."""
    fit_listing = set(session.scalars(select(Category.id).where(Category.lists_fits)))
    return {
        (c, name): misfits.NOT_LISTED if c in fit_listing and reason is not None else reason
        for (c, name), reason in expected.items()
    }


def _check(session: Session) -> None:
    expected = _reference(session)
    assert _view(session) == _as_the_view_has_it(session, expected)
    names = dict(session.execute(select(Worker.id, Worker.name)).all())
    for category_id in {category_id for category_id, _ in expected}:
        listed = {fit.worker: fit.reason for fit in category_fit(session, category_id)}
        assert listed == {
            name: reason for (c, name), reason in expected.items() if c == category_id
        }
        fitting = {
            names[worker_id]
            for worker_id in misfits.fitting_workers(session, category_id, frozenset(names))
        }
        assert fitting == {
            name for (c, name), reason in expected.items() if c == category_id and reason is None
        }
        # Draining workers still count for "could ever run it"; none here is offline.
        assert any_worker_fits(session, category_id) == bool(fitting)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=12))
@pytest.mark.parametrize("always_listed", [misfits.MISFITS_ALWAYS_LISTED, 0])
def test_cache_equals_the_reference_after_worker_changes(
    database: Database,
    operations: list[tuple[Any, ...]],
    always_listed: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the default threshold these small clusters list every category's misfits;
    with 0, a category whose misfits outnumber its fits lists its fits (issue 23)."""
    monkeypatch.setattr(misfits, "MISFITS_ALWAYS_LISTED", always_listed)
    with database.transaction() as session:
        for table in (Job, Category, Worker):
            session.execute(delete(table))
    for operation in operations:
        with database.transaction() as session:
            _apply(session, operation)
        with database.transaction(write=False) as session:
            _check(session)
