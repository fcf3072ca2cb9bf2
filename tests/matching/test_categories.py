"""Categories and their cached misfits: shared by equal requests, recomputed per worker
generation, readable through the SQL views."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text

from app.db.engine import Database
from app.db.models import Category, CategoryFit, CategoryMisfit, Worker
from app.matching import candidates, misfits, submission, workers
from app.matching.category_fit import category_fit
from app.matching.dispatch.pull import pull
from app.matching.submission import NO_SUITABLE_WORKER, JobSpec
from app.matching.workers import WorkerSpec


def _submit(session, resources: str, slots: int = 1):  # type: ignore[no-untyped-def]
    return submission.submit_job(session, JobSpec(resources=resources, slots=slots), submitter="t")


def test_equal_requests_share_a_category(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", resources="a: ?x, ?y; b: ?z"))
        first = _submit(session, "a: x, ?y; b: ?z")
        same = _submit(session, "b: ?z\na: ?y, x, x")  # order and exact duplicates differ
        other_slots = _submit(session, "a: x, ?y; b: ?z", slots=2)
        other = _submit(session, "a: x")
        assert first.category_id == same.category_id
        assert len({first.category_id, other_slots.category_id, other.category_id}) == 3
        assert session.scalar(select(func.count()).select_from(Category)) == 3


def test_no_suitable_worker_found(database: Database) -> None:
    """debusine issue #8: with no worker that could ever run it, the job fails at once."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", resources="arch: ?x86", slots=2))
        job = _submit(session, "arch: arm")
        assert job.state.value == "failed" and job.failure_reason == NO_SUITABLE_WORKER
        too_big = _submit(session, "", slots=3)
        assert too_big.failure_reason == NO_SUITABLE_WORKER
        fits = _submit(session, "arch: ?x86", slots=2)
        assert fits.state.value == "waiting" and fits.failure_reason is None


def test_worker_change_bumps_generation_and_rewrites_misfits(database: Database) -> None:
    with database.transaction() as session:
        worker, _ = workers.upsert_worker(session, WorkerSpec(name="w", resources="a: ?x"))
        job = _submit(session, "a: y")
        assert job.state.value == "failed"
        misfit = session.scalars(select(CategoryMisfit)).one()
        assert (misfit.generation, misfit.reason) == (1, "job-requires-tag")

        # Same definition written differently: nothing that matching sees changed.
        worker, _ = workers.upsert_worker(session, WorkerSpec(name="w", resources="a:?x"))
        assert worker.generation == 1

        worker, _ = workers.upsert_worker(session, WorkerSpec(name="w", resources="a: ?x, ?y"))
        assert worker.generation == 2
        assert session.scalar(select(func.count()).select_from(CategoryMisfit)) == 0
        later = _submit(session, "a: y")
        assert later.state.value == "waiting" and later.category_id == job.category_id

        worker, _ = workers.upsert_worker(
            session, WorkerSpec(name="w", resources="a: ?x, ?y", slots=0)
        )
        assert worker.generation == 3
        reasons = session.execute(select(CategoryMisfit.reason, CategoryMisfit.generation)).all()
        assert set(reasons) == {("too-few-slots", 3)}


def test_stale_misfit_rows_are_not_read(database: Database) -> None:
    """Rows of an older generation never count, even if something left them behind."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", resources="a: ?x"))
        job = _submit(session, "a: y")
        session.execute(text("UPDATE workers SET generation = generation + 1"))
        fit = session.execute(
            text("SELECT fits, reason FROM v_category_fit WHERE category_id = :c"),
            {"c": job.category_id},
        ).one()
        assert (fit.fits, fit.reason) == (1, None)


def test_worker_required_tags_act_as_taints(database: Database) -> None:
    """Momotor (docs/notations/momotor.md): a worker that requires a tag rejects every job
    that does not name it."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="gpu", resources="gpu: cuda"))
        assert _submit(session, "").state.value == "failed"
        assert _submit(session, "gpu: ?cuda").state.value == "waiting"
        assert _submit(session, "gpu: ~cuda").state.value == "failed"


def test_views_answer(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", resources="a: ?x", slots=2))
        workers.upsert_worker(session, WorkerSpec(name="v", resources="", slots=1))
        job = _submit(session, "a: x")
        waiting = session.execute(text("SELECT job_id, category_id FROM v_waiting_jobs")).all()
        assert waiting == [(job.id, job.category_id)]
        fit = dict(session.execute(text("SELECT worker_name, reason FROM v_category_fit")).all())
        assert fit == {"w": None, "v": "job-requires-tag"}
        free = session.execute(
            text(
                "SELECT worker_name, queue_name, free_slots, allocated_slots "
                "FROM v_queue_instance_free ORDER BY worker_name"
            )
        ).all()
        assert [tuple(r) for r in free] == [("v", "default", 1, 0), ("w", "default", 2, 0)]
        assert session.scalar(select(func.count()).select_from(Worker)) == 2


def _new_category(session, fleet: dict[str, str], resources: str):  # type: ignore[no-untyped-def]
    """Register the fleet (name -> resources), submit one job of a new request: the job
    and its category."""
    for name, offered in fleet.items():
        workers.upsert_worker(session, WorkerSpec(name=name, resources=offered))
    job = _submit(session, resources)
    category = session.get(Category, job.category_id)
    assert category is not None
    return job, category


def test_a_category_misfitting_most_workers_lists_its_fits(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: a new category writes the smaller side of its pairs. Here 3 of 4 workers
    cannot run it, so it stores one fit row instead of three misfit rows; every reader
    still sees the same fit, and why the others do not fit is computed when asked."""
    monkeypatch.setattr(misfits, "MISFITS_ALWAYS_LISTED", 2)
    with database.transaction() as session:
        fleet = {"gpu": "gpu: ?cuda", "a": "", "b": "", "c": ""}
        job, category = _new_category(session, fleet, "gpu: cuda")
        assert category.lists_fits
        assert session.execute(select(CategoryFit.worker_id)).scalars().all() == [
            session.scalar(select(Worker.id).where(Worker.name == "gpu"))
        ]
        assert session.scalar(select(func.count()).select_from(CategoryMisfit)) == 0
        assert [c.worker for c in candidates.job_candidates(session, job)] == ["gpu"]
        assert {f.worker: f.reason for f in category_fit(session, category.id)} == {
            "gpu": None,
            "a": "job-requires-tag",
            "b": "job-requires-tag",
            "c": "job-requires-tag",
        }
        view = dict(
            session.execute(
                text("SELECT worker_name, reason FROM v_category_fit WHERE category_id = :c"),
                {"c": category.id},
            ).all()
        )
        assert view == {"gpu": None, "a": "not-listed", "b": "not-listed", "c": "not-listed"}
        assert pull(session, "a") is None

        # A worker that changes to fit gets a fit row of its new generation.
        workers.upsert_worker(session, WorkerSpec(name="a", resources="gpu: ?cuda"))
        assert {f.worker for f in category_fit(session, category.id) if f.fits} == {"gpu", "a"}
        pulled = pull(session, "a")
        assert pulled is not None and pulled.id == job.id


def test_a_category_most_workers_fit_keeps_listing_its_misfits(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the choice: 1 misfit against 3 fits is the smaller side."""
    monkeypatch.setattr(misfits, "MISFITS_ALWAYS_LISTED", 0)
    with database.transaction() as session:
        fleet = {"a": "x: ?y", "b": "x: ?y", "c": "x: ?y", "d": ""}
        _job, category = _new_category(session, fleet, "x: y")
        assert not category.lists_fits
        assert session.scalar(select(func.count()).select_from(CategoryFit)) == 0
        (misfit,) = session.scalars(select(CategoryMisfit)).all()
        assert misfit.reason == "job-requires-tag"
