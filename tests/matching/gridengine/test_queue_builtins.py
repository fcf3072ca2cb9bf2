"""Built-in queue attributes of a queue instance (queue_conf(5): qname, hostname, seq_no
and the limits) survive every administrator's change through the values service
(app/matching/gridengine/values.py), on both databases, and the misfit cache keeps
matching ``-l q=``, ``-l hostname=`` and ``-l h_rt=`` there."""

from __future__ import annotations

from sqlalchemy import select

from app.db.engine import Database
from app.db.models import QueueInstance
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.values import Target, read_values
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec


def _target(database: Database) -> Target:
    with database.transaction() as session:
        worker, _ = upsert_worker(session, WorkerSpec(name="h1", queues=(QueueSpec("b.q", 2),)))
        qi_id = session.scalar(select(QueueInstance.id).where(QueueInstance.worker_id == worker.id))
        assert qi_id is not None
        return Target("queue_instance", worker.id, qi_id)


def test_complex_values_leave_the_builtins_alone(database: Database) -> None:
    """queue_conf(5) complex_values is one attribute of the queue; the built-ins are others."""
    target = _target(database)
    with database.transaction() as session:
        before = read_values(session, target).attributes
        set_values(session, target, "complex_values", {"h_vmem": "4G"})
        after = read_values(session, target)
    assert after.attributes == before
    assert (before["qname"], before["hostname"], before["h_rt"]) == ("b.q", "h1", "INFINITY")
    assert after.complex_values == {"h_vmem": "4G"}


def test_one_builtin_set_keeps_the_others_and_dropping_it_restores_its_default(
    database: Database,
) -> None:
    """queue_conf(5): each limit is its own setting. The administrator's ``attributes``
    override the built-ins they name; the others keep the values the instance was created
    with, and an override left out again falls back to its created value."""
    target = _target(database)
    with database.transaction() as session:
        created = read_values(session, target).attributes
        set_values(session, target, "attributes", {"h_vmem": "4G", "seq_no": "3"})
        overridden = read_values(session, target).attributes
        set_values(session, target, "attributes", {})
        restored = read_values(session, target).attributes
    assert overridden == {**created, "h_vmem": "4G", "seq_no": "3"}
    assert restored == created
