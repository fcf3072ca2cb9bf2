"""The in-memory cluster state of the Grid Engine engine (ClusterState and load_state in
app/matching/gridengine/state.py) decides and loads as the slow paths did (issue 6, speed):
evaluating a queue instance with cut offers, memoised level verdicts and partial
recomputes gives the reference evaluator's verdict as bookings accumulate, and loading
one worker in one statement gives what the whole cluster's load has for it.
"""

from __future__ import annotations

import random

from sqlalchemy import event

from app.db.engine import Database
from app.db.models import Category
from app.matching.gridengine.bookings import apply_in_memory
from app.matching.gridengine.decide import category_lists, plan_job
from app.matching.gridengine.state import load_state
from app.matching.gridengine.table import load_table
from app.notations.gridengine.evaluator import evaluate_queue_instance, level_offers
from tests.support.gridengine_values import evaluator_cluster, random_requests


def test_cut_offers_memoised_verdicts_and_partial_recomputes_decide_as_the_evaluator(
    database: Database,
) -> None:
    """ClusterState.evaluate (offers cut to the lists, level verdicts kept until a booking,
    only the booked attributes' offers recomputed) gives the evaluator's own QueueFit on
    all offers, as bookings accumulate."""
    rng = random.Random(63)
    with database.transaction() as session:
        evaluator_cluster(session, rng)
        table = load_table(session)
        state = load_state(session, table)
        lists = [
            category_lists(
                table,
                random_requests(rng),
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
        workers = evaluator_cluster(session, rng)
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
