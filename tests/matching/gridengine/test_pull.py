"""The Core Grid Engine pull (app/matching/gridengine/pull.py) decides and books exactly as
the ORM path it replaced, on both databases, and a guard that fails writes nothing.

The comparison runs every pull twice on the same database state: first the ORM path in a
savepoint that is rolled back, then the Core path; both must leave the same rows (the
job, its allocations, bookings and event, every queue instance's and consumable row's
usage). The cluster has consumables per slot (integer and fractional memory amounts) and
per job, at the global, host and queue level, an exclusive attribute, FORCED and soft
requests and parallel environments, so that every kind of booking is written.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select, text, union_all, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import ConsumableUsage, Job, JobState, QueueInstance, Worker
from app.matching.dispatch import pull as dispatch
from app.matching.dispatch.pull_claim import claim_with_category
from app.matching.dispatch.puller import Puller, lock_puller
from app.matching.gridengine import loaders
from app.matching.gridengine.admin import change_attribute, set_values
from app.matching.gridengine.bookings import ConsumableBooking
from app.matching.gridengine.decide import pe_from_database, plan_job
from app.matching.gridengine.loaders import table_parameters, worker_row_parts
from app.matching.gridengine.parallel import upsert_pe
from app.matching.gridengine.pull import (
    _CLAIMS_WITH_STATE,
    _LOCK_ROWS,
    GridEnginePull,
    _claim_and_book_pg,
    take_in_one,
)
from app.matching.gridengine.state import ClusterState, state_of_rows
from app.matching.gridengine.table import (
    create_attribute,
    definition_from_body,
    load_table,
)
from app.matching.gridengine.values import Target
from app.matching.requests import JobSpec
from app.matching.submission import submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.notations.gridengine.attribute_table import ComplexTable
from app.wire.queues import QueueSpec
from tests.support.gridengine_values import define_attributes


def _more_attributes(session: Session) -> None:
    for row in (
        {"name": "mem", "shortcut": "mem", "type": "MEMORY", "consumable": "YES", "default": "0"},
        {"name": "jlic", "shortcut": "jlic", "type": "INT", "consumable": "JOB", "default": "0"},
        {
            "name": "excl",
            "shortcut": "excl",
            "type": "BOOL",
            "relop": "EXCL",
            "consumable": "YES",
            "default": "0",
        },
    ):
        create_attribute(
            session,
            definition_from_body(
                {"relop": "<=", "requestable": "YES", "urgency": 0, **row}  # type: ignore[dict-item]
            ),
        )


def _hard(rng: random.Random) -> str:
    items = []
    for name, choices in (
        ("os", ["LINUX", "l*"]),
        ("rle", ["1", "3", "5"]),
        ("lic", ["0", "1", "2"]),
        ("mem", ["0.5G", "1.25G", "3G"]),
        ("jlic", ["1", "2"]),
        ("excl", ["true", "false"]),
    ):
        if rng.random() < 0.3:
            items.append(f"{name}={rng.choice(choices)}")
    return ",".join(items)


def _cluster(session: Session, rng: random.Random) -> list[str]:
    define_attributes(session)
    _more_attributes(session)
    set_values(session, Target("global"), "complex_values", {"lic": "30", "jlic": "6"})
    upsert_pe(session, "mpi", "$fill_up", 6)
    upsert_pe(session, "smp", "$pe_slots", 4)
    names = []
    for index in range(6):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(
                name=f"h{index}",
                queues=(QueueSpec("a", rng.randint(1, 3)), QueueSpec("b", rng.randint(1, 2))),
            ),
        )
        host = Target("host", worker.id)
        set_values(session, host, "load_values", {"arch": "lx-amd64"})
        set_values(
            session,
            host,
            "complex_values",
            {
                "os": rng.choice(["Linux", "BSD"]),
                "rank_le": str(rng.randint(2, 5)),
                "lic": str(rng.randint(2, 6)),
                "mem": f"{rng.choice([2, 4, 6.5])}G",
                "excl": "true",
                "jlic": "2",
            },
        )
        for qi in worker.queue_instances:
            if rng.random() < 0.5:
                set_values(
                    session,
                    Target("queue_instance", worker.id, qi.id),
                    "complex_values",
                    {"mem": f"{rng.choice([1.5, 3])}G", "rank_ne": str(rng.randint(1, 3))},
                )
        names.append(worker.name)
    for _ in range(70):
        pe = rng.choice([None, None, None, "mpi", "smp"])
        submit_job(
            session,
            JobSpec(
                hard=_hard(rng),
                soft=rng.choice(["", "rle=1", "os=bsd"]),
                priority=rng.randint(0, 2),
                pe=pe,
                pe_slots=None if pe is None else rng.choice(["2", "1-3"]),
            ),
            submitter="t",
        )
    return names


def _snapshot(session: Session, job: Job | None) -> dict[str, Any]:
    """Every row a pull may write, in a comparable form (times left out)."""
    rows: dict[str, Any] = {
        "queue_instances": session.execute(
            text("SELECT id, used_slots FROM queue_instances ORDER BY id")
        ).all(),
        "usage": session.execute(
            text("SELECT id, used, used_nonexclusive FROM consumable_usage ORDER BY id")
        ).all(),
        "running": session.execute(
            text(
                "SELECT id, worker_id, slots, attempts FROM jobs WHERE state = 'running' "
                "ORDER BY id"
            )
        ).all(),
    }
    if job is None:
        return rows
    parameters = {"job": job.id}
    rows["job"] = (job.id, job.state, job.worker_id, job.slots, job.attempts)
    rows["started"] = job.started_at is not None
    rows["allocations"] = session.execute(
        text(
            "SELECT queue_instance_id, slots, allocated_at IS NOT NULL, released_at "
            "FROM allocations WHERE job_id = :job ORDER BY queue_instance_id"
        ),
        parameters,
    ).all()
    rows["bookings"] = session.execute(
        text(
            "SELECT usage_id, amount, nonexclusive FROM job_bookings WHERE job_id = :job "
            "ORDER BY usage_id"
        ),
        parameters,
    ).all()
    rows["events"] = session.execute(
        text("SELECT kind, worker, detail FROM job_events WHERE job_id = :job ORDER BY id"),
        parameters,
    ).all()
    return rows


class _OrmGridEnginePull:
    """Stands in for GridEnginePull: the same claim-then-decide steps, but through the ORM
    path that workers without Grid Engine values take (claim_with_category, the loaded
    ClusterState, dispatch_on), so that a worker with values can be served both ways."""

    def __init__(self, session: Session, puller: Puller) -> None:
        self._session = session
        self._puller = puller
        self._state: ClusterState | None = None

    def take(self, job_id: int) -> Job | None:
        held = claim_with_category(self._session, job_id)
        if held is None:
            return None
        job, category = held
        if self._state is None:
            self._state = dispatch.load_puller_state(self._session, self._puller)
        return dispatch.start_by_grid_engine_rules(
            self._session, self._puller, job, category, self._state
        )


@pytest.fixture
def orm_pull(monkeypatch: pytest.MonkeyPatch) -> Callable[[Session, str], Job | None]:
    """A pull that serves workers with Grid Engine values through the ORM path, the
    reference the Core statements are compared to."""

    def pull_through_orm(session: Session, worker_name: str) -> Job | None:
        with monkeypatch.context() as patched:
            patched.setattr(dispatch, "GridEnginePull", _OrmGridEnginePull)
            return dispatch.pull(session, worker_name)

    return pull_through_orm


def test_the_core_pull_books_what_the_orm_pull_booked(
    database: Database, orm_pull: Callable[[Session, str], Job | None]
) -> None:
    rng = random.Random(66)
    with database.transaction() as session:
        names = _cluster(session, rng)
    taken = 0
    seen: set[str] = set()
    for _ in range(40):
        name = rng.choice(names)
        with database.transaction() as session:
            running = session.execute(
                select(Job.id, Worker.name)
                .join(Worker, Worker.id == Job.worker_id)
                .where(Job.state == JobState.RUNNING)
                .order_by(Job.id)
            ).all()
            if running and rng.random() < 0.3:
                # Finished jobs give their bookings back, so later pulls find room.
                job_id, worker_name = rng.choice(running)
                dispatch.finish(session, job_id, worker_name, "finished")
            nested = session.begin_nested()
            orm_job = orm_pull(session, name)
            expected = _snapshot(session, orm_job)
            nested.rollback()
            core_job = dispatch.pull(session, name)
            assert _snapshot(session, core_job) == expected, name
            if core_job is None:
                continue
            taken += 1
            for _usage, amount, nonexclusive in expected["bookings"]:
                seen.add("nonexclusive" if nonexclusive else "exclusive or counted")
                seen.add("fraction of a GiB" if amount % 2**30 else "whole")
            if len(expected["allocations"]) > 1:
                seen.add("several queue instances")
    # The pulls took jobs, with every kind of booking among them; and some pulls found
    # nothing that fits.
    assert 10 <= taken < 40
    assert seen == {
        "nonexclusive",
        "exclusive or counted",
        "fraction of a GiB",
        "whole",
        "several queue instances",
    }


def _one_job(session: Session, hard: str) -> tuple[Worker, int]:
    define_attributes(session)
    _more_attributes(session)
    set_values(session, Target("global"), "complex_values", {"mem": "4G"})
    worker, _ = upsert_worker(session, WorkerSpec(name="h0", queues=(QueueSpec("a", 2),)))
    set_values(session, Target("host", worker.id), "complex_values", {"mem": "8G", "key": "1"})
    job = submit_job(session, JobSpec(hard=hard), submitter="t")
    return worker, job.id


def _plan(
    session: Session, worker: Worker, job_id: int
) -> tuple[dict[int, int], list[ConsumableBooking]]:
    puller = lock_puller(session, worker.name, utcnow())
    assert puller is not None and puller.complex_cluster
    pull = GridEnginePull(session, puller)
    claimed = pull.claim(job_id)
    assert claimed is not None and pull.state is not None
    decision, bookings = plan_job(
        pull.state, claimed, pull.state.queue_order(), pe_from_database(session)
    )
    assert decision.assignment is not None
    return decision.assignment, bookings


def _nothing_written(session: Session, job_id: int) -> None:
    assert session.scalar(select(Job.state).where(Job.id == job_id)) is JobState.WAITING
    assert session.scalars(select(ConsumableUsage.used)).all() == [0.0, 0.0]
    assert session.scalars(select(QueueInstance.used_slots)).all() == [0]
    for table in ("allocations", "job_bookings"):
        assert session.scalar(text(f"SELECT count(*) FROM {table}")) == 0
    assert session.scalar(text("SELECT count(*) FROM job_events WHERE kind = 'dispatched'")) == 0


@pytest.mark.parametrize("taken", ["global", "slots", "slots alone"])
def test_a_failing_guard_writes_nothing(database: Database, taken: str) -> None:
    """A concurrent dispatch took the global memory (or the slots) between the decision
    and the booking: nothing is written, not even the host's memory, whose own guard
    holds. With several guarded rows they are locked and checked before the write; with
    the slots alone, the write statement's other parts depend on the slots' update.
    PostgreSQL only (SQLite keeps book()'s savepoint)."""
    if database.dialect_name != "postgresql":
        pytest.skip("the one-statement booking is PostgreSQL's")
    with database.transaction() as session:
        worker, job_id = _one_job(session, "key=1" if taken == "slots alone" else "mem=3G,key=1")
    with database.transaction() as session:
        assignment, bookings = _plan(session, worker, job_id)
        levels = {b.target.level.value for b in bookings if b.usage_id}
        assert levels == (set() if taken == "slots alone" else {"global", "host"})
        if taken == "global":
            session.execute(
                update(ConsumableUsage)
                .where(ConsumableUsage.level == "global")
                .values(capacity=2 * 1024**3)
            )
        else:
            session.execute(update(QueueInstance).values(slots=0))
        assert take_in_one(session, job_id, assignment, bookings, worker.id, "h0") is None
        session.execute(update(QueueInstance).values(slots=2))
        _nothing_written(session, job_id)


def _table_rows_read(session: Session, worker_id: int) -> tuple[int, ComplexTable]:
    """How many attribute rows a pull's state statement sent, and the table it gave."""
    rows = session.execute(
        union_all(*worker_row_parts(with_table=True)),
        {"sge_worker_ids": [worker_id], **table_parameters()},
    ).all()
    state = state_of_rows(rows, {worker_id: "h0"}, None)
    return sum(1 for row in rows if row.part == 3), state.table


def test_the_table_rows_are_read_again_only_when_the_table_changed(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that has not read the table yet.
    monkeypatch.setattr(loaders, "_KNOWN_TABLE", None)
    with database.transaction() as session:
        worker, _job_id = _one_job(session, "mem=1G")
        read, table = _table_rows_read(session, worker.id)
        assert read == len(table) > 50 and table is load_table(session)
        # Unchanged: the digest alone, the same table object.
        assert _table_rows_read(session, worker.id) == (0, table)
        change_attribute(
            session,
            "mem",
            definition_from_body(
                {
                    "name": "mem",
                    "shortcut": "mem",
                    "type": "MEMORY",
                    "relop": "<=",
                    "requestable": "YES",
                    "consumable": "YES",
                    "default": "1G",
                    "urgency": 0,
                }
            ),
        )
        read, changed = _table_rows_read(session, worker.id)
        assert read == len(changed) and changed["mem"].default_value == 2.0**30
        assert changed is load_table(session)
        create_attribute(
            session,
            definition_from_body(
                {
                    "name": "extra",
                    "shortcut": "ex",
                    "type": "INT",
                    "relop": "<=",
                    "requestable": "YES",
                    "consumable": "NO",
                    "default": "0",
                    "urgency": 0,
                }
            ),
        )
        read, grown = _table_rows_read(session, worker.id)
        assert read == len(grown) == len(changed) + 1 and "ex" in grown
        assert _table_rows_read(session, worker.id) == (0, grown)


def test_the_pull_statements_stay_within_psycopgs_query_cache() -> None:
    """psycopg converts a statement's text again on every execution when it is longer
    than 4,096 characters (or has more than 50 parameters): the Core pull's statements
    stay below both."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS
    from sqlalchemy.dialects import postgresql

    for statement in (*_CLAIMS_WITH_STATE.values(), _claim_and_book_pg(), _LOCK_ROWS):
        compiled = statement.compile(dialect=postgresql.psycopg.dialect())
        assert len(str(compiled)) <= MAX_CACHED_STATEMENT_LENGTH
        assert len(compiled.params) <= MAX_CACHED_STATEMENT_PARAMS
