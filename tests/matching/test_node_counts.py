"""A job that asks for N nodes never runs on fewer than N distinct workers, whichever path
starts it: a pull (app/matching/dispatch/pull.py), a Grid Engine scheduling run
(app/matching/gridengine/run.py, POST /v1/schedule) or an allocation
(app/matching/allocation/allocate.py, POST /v1/jobs/{id}/allocate); with or without
inventories (issue 22). A path that cannot find N workers leaves the job waiting.

Sources of the node counts:

* Flux RFC 14 (Canonical Job Specification): a ``node`` vertex with ``count: N`` asks
  for N distinct nodes, and jobmatch's worker is one node (app/matching/allocation/spec.py);
  RFC 46 writes it ``node=N/slot=S/core=C``.
* Grid Engine sge_pe(5), ``allocation_rule``: an integer k places exactly k slots on each
  host, so a parallel job of k*N slots spans N hosts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import (
    Allocation,
    InventoryBooking,
    Job,
    JobState,
    ParallelEnvironment,
    QueueInstance,
    Worker,
    WorkerInventory,
)
from app.matching import candidates, readiness, submission, workers
from app.matching.allocation import allocate
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.gridengine.parallel import upsert_pe
from app.matching.gridengine.run import schedule
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.support.thoroughness import examples

#: (slots, cores of its inventory, or None for a worker without an inventory)
WORKER = st.tuples(st.integers(1, 4), st.one_of(st.none(), st.integers(1, 8)))
FLEET = st.lists(WORKER, min_size=1, max_size=5)
PROPERTY = settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fresh_fleet(database: Database, fleet: list[tuple[int, int | None]]) -> list[str]:
    """Empty the cluster (hypothesis runs every example on the same database) and
    register the fleet: its worker names."""
    with database.transaction() as session:
        session.execute(delete(Job))
        session.execute(delete(Worker))
        session.execute(delete(ParallelEnvironment))
    names = [f"w{index}" for index in range(len(fleet))]
    with database.transaction() as session:
        for name, (slots, cores) in zip(names, fleet, strict=True):
            inventory = None if cores is None else f"node/core={cores}"
            workers.upsert_worker(session, WorkerSpec(name=name, slots=slots, inventory=inventory))
    return names


def _workers_of(session: Session, job_id: int) -> set[int]:
    """Every worker the running job holds something on: its own, its queue instances',
    its inventory vertices'."""
    job = session.get(Job, job_id)
    assert job is not None and job.worker_id is not None
    by_slots = session.scalars(
        select(QueueInstance.worker_id)
        .join(Allocation, Allocation.queue_instance_id == QueueInstance.id)
        .where(Allocation.job_id == job_id, Allocation.released_at.is_(None))
    )
    by_vertices = session.scalars(
        select(InventoryBooking.worker_id).where(
            InventoryBooking.job_id == job_id, InventoryBooking.released_at.is_(None)
        )
    )
    return {job.worker_id, *by_slots, *by_vertices}


def _state(database: Database, job_id: int) -> JobState:
    with database.transaction(write=False) as session:
        return submission.get_job(session, job_id).state


def _check_and_cancel(database: Database, job_id: int, nodes: int, path: str) -> None:
    with database.transaction() as session:
        held = _workers_of(session, job_id)
        assert len(held) >= nodes, f"{path} started a {nodes}-node job on {len(held)} worker(s)"
        submission.cancel_job(session, job_id)


def _every_pull(database: Database, names: list[str], job_id: int, nodes: int) -> None:
    for name in names:
        with database.transaction() as session:
            pulled = dispatch.pull(session, name)
            taken = pulled is not None and pulled.id == job_id
        if taken:
            _check_and_cancel(database, job_id, nodes, f"a pull by {name}")
            return


def _has_inventory(session: Session, worker_id: int) -> bool:
    return session.get(WorkerInventory, worker_id) is not None


def _cancel_if_waiting(database: Database, job_id: int) -> None:
    with database.transaction() as session:
        if submission.get_job(session, job_id).state is JobState.WAITING:
            submission.cancel_job(session, job_id)


def _scheduling_run(database: Database, spec: JobSpec, nodes: int) -> bool:
    """Submit the job and run POST /v1/schedule's service: whether it started the job (on
    enough workers, checked, then cancelled)."""
    job_id = _submit(database, spec)
    assert job_id is not None
    with database.transaction() as session:
        schedule(session)
    if _state(database, job_id) is not JobState.RUNNING:
        _cancel_if_waiting(database, job_id)
        return False
    _check_and_cancel(database, job_id, nodes, "POST /v1/schedule")
    return True


def _submit(database: Database, spec: JobSpec) -> int | None:
    """The waiting job's id (None when no worker could ever run it: it failed at once)."""
    with database.transaction() as session:
        job = submission.submit_job(session, spec, submitter="t")
        return job.id if job.state is JobState.WAITING else None


@PROPERTY
@given(
    fleet=FLEET,
    nodes=st.integers(1, 4),
    slots=st.integers(1, 2),
    cores=st.integers(1, 4),
)
def test_an_n_node_jobspec_gets_n_distinct_workers_on_every_path(
    database: Database, fleet: list[tuple[int, int | None]], nodes: int, slots: int, cores: int
) -> None:
    """RFC 14 node counts, through pull, POST /v1/schedule and POST /v1/jobs/{id}/allocate;
    and the allocation does place the job when N inventories could hold it."""
    names = _fresh_fleet(database, fleet)
    shape = f"node={nodes}/slot={slots}/core={cores}"
    spec = JobSpec(shape=shape)
    pulled = _submit(database, spec)
    if pulled is None:
        return
    _every_pull(database, names, pulled, nodes)
    if nodes > 1:
        assert _state(database, pulled) is JobState.WAITING, "a pull took a multi-node job"
        with database.transaction() as session:
            # Explain agrees (issue 35, which replaced "every worker says
            # needs-several-nodes"): a worker can run it now exactly when an allocation
            # now places it there; a worker without an inventory never takes part.
            job = submission.get_job(session, pulled)
            placed = allocate.placement_now(session, job, "first") or []
            ids = {name: id_ for name, id_ in session.execute(select(Worker.name, Worker.id))}
            verdicts, _summary = readiness.explain_workers(session, job, None, "first", [])
            for verdict in verdicts:
                assert verdict.can_run_now == (ids[verdict.worker] in placed), verdict
            bare = {e.worker for e in candidates.explain_job(session, job)} - {
                name for name, worker_id in ids.items() if _has_inventory(session, worker_id)
            }
            for verdict in verdicts:
                if verdict.worker in bare:
                    assert verdict.reason == "needs-several-nodes", verdict
    _cancel_if_waiting(database, pulled)
    _scheduling_run(database, spec, nodes)
    allocated = _submit(database, spec)
    assert allocated is not None
    roomy = sum(
        1 for _slots, inventory in fleet if inventory is not None and inventory >= slots * cores
    )
    try:
        with database.transaction() as session:
            allocate.schedule_job(session, allocated, "first")
    except ConflictError:
        assert roomy < nodes, f"{roomy} inventories could hold {shape}, yet it was not placed"
        return
    _check_and_cancel(database, allocated, nodes, "POST /v1/jobs/{id}/allocate")


@PROPERTY
@given(fleet=FLEET, hosts=st.integers(1, 4), per_host=st.integers(1, 2))
def test_a_grid_engine_job_with_a_fixed_allocation_rule_spans_its_hosts(
    database: Database, fleet: list[tuple[int, int | None]], hosts: int, per_host: int
) -> None:
    """sge_pe(5): ``allocation_rule`` k with k*N slots takes k slots on each of N hosts.
    A pull (one host) never starts it when N > 1; a scheduling run spreads it."""
    names = _fresh_fleet(database, fleet)
    with database.transaction() as session:
        upsert_pe(session, "mpi", str(per_host), 64)
    spec = JobSpec(pe="mpi", pe_slots=str(per_host * hosts))
    pulled = _submit(database, spec)
    assert pulled is not None  # Grid Engine jobs wait
    _every_pull(database, names, pulled, hosts)
    if hosts > 1:
        assert _state(database, pulled) is JobState.WAITING, "one host pulled a spanning job"
    _cancel_if_waiting(database, pulled)
    if not _scheduling_run(database, spec, hosts):
        able = sum(1 for slots, _inventory in fleet if slots >= per_host)
        assert able < hosts, f"{able} hosts could give {per_host} slots, yet the job waits"
