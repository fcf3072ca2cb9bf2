"""The fast paths of the Grid Engine engine (issue 6, speed) decide as the slow ones did,
on both databases:

* the misfit rows a *changed worker* gets (worker scope, app/matching/complex_sql.py) agree
  with the reference evaluator, as the rows of a new category do (the oracle test in
  test_sql_matches_evaluator.py sets every value before submitting, so it only sees the category
  scope);
* a scheduling run's batched bookings (app/matching/run_bookings.py) leave the books
  consistent: used slots and consumable usage are the sums of the allocations and job
  bookings, every dispatched job runs on the worker of its master queue;
* a batched guard that no longer holds raises instead of overbooking.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import event, func, select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import (
    Allocation,
    Category,
    ConsumableUsage,
    Job,
    JobBooking,
    JobState,
    QueueInstance,
    Worker,
)
from app.matching.complex_dispatch import (
    apply_in_memory,
    category_lists,
    has_complex_values,
    load_state,
    plan_job,
)
from app.matching.complex_sql import Scope
from app.matching.complex_table import load_table
from app.matching.complex_values import Target, set_values
from app.matching.errors import ConflictError
from app.matching.misfits import fits
from app.matching.requests import JobSpec
from app.matching.run_bookings import RunBookings
from app.matching.schedule import schedule
from app.matching.submission import submit_job
from app.matching.workers import QueueSpec, WorkerSpec, upsert_worker
from app.notations.complex_matching import evaluate_queue_instance, level_offers
from tests.support.gridengine_values import (
    PATTERNS,
    define_attributes,
    give_random_values,
)


def _random_requests(rng: random.Random) -> str:
    items = [f"arch={rng.choice(PATTERNS)}"]
    for name, choices in (
        ("os", ["LINUX", "bsd", "l*"]),
        ("rle", ["1", "3", "6"]),
        ("rgt", ["0.25", "1"]),
        ("rne", ["1", "2"]),
        ("lic", ["0", "1", "3"]),
        ("key", ["1"]),
    ):
        if rng.random() < 0.4:
            items.append(f"{name}={rng.choice(choices)}")
    return ",".join(items)


def test_a_changed_worker_gets_the_misfit_rows_the_evaluator_decides(
    database: Database,
) -> None:
    rng = random.Random(61)
    with database.transaction() as session:
        define_attributes(session)
        workers = [
            upsert_worker(
                session,
                WorkerSpec(
                    name=f"h{index}",
                    queues=tuple(QueueSpec(f"q{n}", rng.randint(1, 2)) for n in range(2)),
                ),
            )[0]
            for index in range(8)
        ]
        # Categories first, values afterwards: every value change recomputes the rows of
        # one worker (or, at the global level, of all) against every existing category.
        jobs = [
            submit_job(session, JobSpec(hard=_random_requests(rng)), submitter="t")
            for _ in range(30)
        ]
        set_values(session, Target("global"), "complex_values", {"rank_gt": "0.5"})
        for worker in workers:
            give_random_values(session, rng, worker)
        session.flush()
        table = load_table(session)
        state = load_state(session, table)
        compared = kept = 0
        for job in jobs:
            category = session.get(Category, job.category_id)
            assert category is not None
            hard, soft = category_lists(table, category.hard, category.soft)
            for worker in session.scalars(select(Worker)):
                sql_keeps = bool(
                    session.scalar(select(fits(category.id, worker.id, worker.generation)))
                )
                oracle = any(
                    state.evaluate(slot, hard, soft).fits for slot in state.queue_order([worker.id])
                )
                assert sql_keeps is oracle, (category.hard, worker.name)
                compared += 1
                kept += oracle
        assert compared == 30 * 8 and 0 < kept < compared


def test_a_misfit_scope_names_exactly_one_side() -> None:
    with pytest.raises(ValueError):
        Scope()
    with pytest.raises(ValueError):
        Scope(category_id=1, worker_id=1)
    assert Scope(worker_id=3).params == {"sge_scope_id": 3}


def _cluster(session, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    define_attributes(session)
    set_values(session, Target("global"), "complex_values", {"lic": "7"})
    for index in range(4):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(name=f"h{index}", queues=(QueueSpec("a", 2), QueueSpec("b", 1))),
        )
        set_values(session, Target("host", worker.id), "complex_values", {"lic": "3"})
    for _ in range(40):
        hard = rng.choice(["lic=1", "lic=2", "rle=1", "lic=0"])
        submit_job(
            session,
            JobSpec(hard=hard, priority=rng.randint(0, 3)),
            submitter="t",
        )


def test_a_scheduling_run_leaves_consistent_books(database: Database) -> None:
    with database.transaction() as session:
        _cluster(session, random.Random(62))
    with database.transaction() as session:
        report = schedule(session)
    assert 0 < report.dispatched < 40
    with database.transaction() as session:
        running = session.scalars(select(Job).where(Job.state == JobState.RUNNING)).all()
        assert len(running) == report.dispatched
        for job in running:
            allocations = session.scalars(
                select(Allocation).where(Allocation.job_id == job.id)
            ).all()
            assert sum(a.slots for a in allocations) == job.slots == 1
            qi = session.get(QueueInstance, allocations[0].queue_instance_id)
            assert qi is not None and qi.worker_id == job.worker_id
            assert job.started_at is not None
        for qi in session.scalars(select(QueueInstance)):
            booked = session.scalar(
                select(func.coalesce(func.sum(Allocation.slots), 0)).where(
                    Allocation.queue_instance_id == qi.id
                )
            )
            assert qi.used_slots == booked <= qi.slots
        for usage in session.scalars(select(ConsumableUsage)):
            booked = session.scalar(
                select(func.coalesce(func.sum(JobBooking.amount), 0.0)).where(
                    JobBooking.usage_id == usage.id
                )
            )
            assert usage.used == booked <= usage.capacity
        # The global lic=7 is the binding limit: the run books it to the full.
        total = session.scalar(
            select(ConsumableUsage.used).where(ConsumableUsage.level == "global")
        )
        assert total == 7.0


def test_a_batched_guard_that_fails_raises_instead_of_overbooking(database: Database) -> None:
    with database.transaction() as session:
        worker, _ = upsert_worker(session, WorkerSpec(name="h0", queues=(QueueSpec("a", 1),)))
        qi_id = worker.queue_instances[0].id
    with pytest.raises(ConflictError), database.transaction() as session:
        RunBookings(slots={qi_id: 2}).write(session)
    with database.transaction() as session:
        job = submit_job(session, JobSpec(), submitter="t")
        job.state = JobState.CANCELLED
    with pytest.raises(ConflictError), database.transaction() as session:
        RunBookings(
            started=[
                {
                    "job_key": job.id,
                    "new_worker": worker.id,
                    "new_slots": 1,
                    "new_started": utcnow(),
                }
            ]
        ).write(session)
    with database.transaction() as session:
        assert session.scalar(select(QueueInstance.used_slots)) == 0
        assert session.scalar(select(Job.state)) is JobState.CANCELLED


def _evaluator_cluster(session, rng: random.Random) -> list[Worker]:  # type: ignore[no-untyped-def]
    define_attributes(session)
    set_values(session, Target("global"), "complex_values", {"rank_gt": "0.5", "lic": "9"})
    workers = []
    for index in range(6):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(
                name=f"h{index}",
                queues=tuple(QueueSpec(f"q{n}", rng.randint(1, 3)) for n in range(2)),
            ),
        )
        give_random_values(session, rng, worker)
        workers.append(worker)
    session.flush()
    return workers


def test_cut_offers_memoised_verdicts_and_partial_recomputes_decide_as_the_evaluator(
    database: Database,
) -> None:
    """ClusterState.evaluate (offers cut to the lists, level verdicts kept until a booking,
    only the booked attributes' offers recomputed) gives the evaluator's own QueueFit on
    all offers, as bookings accumulate."""
    rng = random.Random(63)
    with database.transaction() as session:
        _evaluator_cluster(session, rng)
        table = load_table(session)
        state = load_state(session, table)
        lists = [
            category_lists(
                table,
                _random_requests(rng),
                rng.choice(["NONE", "rle=2", "os=bsd,rne=1", "arch=lx*,rgt=1"]),
            )
            for _ in range(25)
        ]
        compared = fitting = 0
        for _round in range(6):
            for hard, soft in lists:
                for slot in state.queue_order():
                    objects = (
                        state.global_host,
                        state.hosts[slot.worker_id],
                        state.queues[slot.id],
                    )
                    reference = evaluate_queue_instance(
                        table, *(o.level_object() for o in objects), hard, soft
                    )
                    assert state.evaluate(slot, hard, soft) == reference
                    compared += 1
                    fitting += reference.fits
            # Book a fitting job somewhere, as a run would, and compare again.
            for hard, soft in rng.sample(lists, 8):
                _decision, bookings = plan_job(
                    state,
                    Category(hard=hard.category_text(), soft=soft.category_text(), pe=None),
                    state.queue_order(),
                    lambda name: None,
                )
                if bookings:
                    apply_in_memory(bookings)
                    for target in {id(b.target): b.target for b in bookings}.values():
                        assert dict(target.offers(table)) == level_offers(
                            table, target.level_object(), target.level
                        )
        assert 0 < fitting < compared


def test_a_pull_loads_one_worker_in_one_statement_as_the_whole_cluster_load_has_it(
    database: Database,
) -> None:
    rng = random.Random(64)
    with database.transaction() as session:
        workers = _evaluator_cluster(session, rng)
        worker = workers[2]
        table = load_table(session)
        whole = load_state(session, table)
        statements: list[str] = []

        def count(*args: object) -> None:
            statements.append(str(args[2]))

        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", count)
        try:
            one = load_state(session, table, [worker.id], names={worker.id: worker.name})
            assert len(statements) == 1
            # Without a table: the attribute table comes in the same statement.
            with_table = load_state(session, None, [worker.id], names={worker.id: worker.name})
            assert len(statements) == 2
        finally:
            event.remove(engine, "before_cursor_execute", count)
        assert with_table.table is table

        def picture(obj):  # type: ignore[no-untyped-def]
            return (
                obj.name,
                obj.complex_values,
                obj.load_values,
                obj.builtin,
                obj.used,
                obj.used_nonexclusive,
                obj.usage_ids,
            )

        assert picture(one.global_host) == picture(whole.global_host)
        assert one.hosts.keys() == {worker.id}
        assert picture(one.hosts[worker.id]) == picture(whole.hosts[worker.id])
        assert one.slots == {k: s for k, s in whole.slots.items() if s.worker_id == worker.id}
        assert {k: picture(q) for k, q in one.queues.items()} == {
            k: picture(whole.queues[k]) for k in one.slots
        }
        for other in (one, with_table):
            assert picture(other.global_host) == picture(whole.global_host)
            assert picture(other.hosts[worker.id]) == picture(whole.hosts[worker.id])
            assert {k: picture(q) for k, q in other.queues.items()} == {
                k: picture(whole.queues[k]) for k in one.slots
            }


def test_the_table_read_with_has_complex_values_serves_the_next_load_once(
    database: Database,
) -> None:
    with database.transaction() as session:
        workers = _evaluator_cluster(session, random.Random(65))
        bare, _ = upsert_worker(session, WorkerSpec(name="bare", queues=(QueueSpec("a", 1),)))
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        with database.transaction() as session:
            expected = load_table(session)
            statements.clear()
            assert has_complex_values(session, workers[0].id)
            assert load_table(session) is expected
            assert len(statements) == 1
            assert load_table(session) is expected
            assert len(statements) == 2  # served once, then read again
            set_values(session, Target("global"), "complex_values", {})
            assert has_complex_values(session, workers[0].id)
            assert not has_complex_values(session, bare.id)
        with database.transaction() as session:
            # A new transaction never sees rows read in an earlier one.
            statements.clear()
            assert load_table(session) is expected
            assert len(statements) == 1
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
