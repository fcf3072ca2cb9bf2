"""The admin client's worker lifecycle methods against a real `jobmatch serve`: a patch
changes only what it gives (the drained worker keeps its resources, slots, properties and
rank), NULL clears a value, and delete refuses a busy worker unless asked to requeue."""

from __future__ import annotations

import pytest

from app.client import (
    NULL,
    AdminClient,
    Conflict,
    JobSpec,
    JobState,
    NotFound,
    ValidationFailed,
    WorkerClient,
    WorkerPatch,
    WorkerSpec,
    WorkerState,
)
from tests.live_server import LiveServer


def test_update_and_delete_a_worker(server: LiveServer, admin: AdminClient) -> None:
    registered = admin.register_worker(
        WorkerSpec(
            name="w1",
            resources="language: ?java",
            slots=2,
            rank=4,
            properties=["ssd"],
            inventory="node/[core=2]",
        )
    )
    assert registered.token is not None

    drained = admin.update_worker(
        "w1", WorkerPatch(state=WorkerState.DRAINING, reason="kernel upgrade")
    )
    assert (drained.state, drained.state_reason, drained.state_set_by) == (
        WorkerState.DRAINING,
        "kernel upgrade",
        "admin",
    )
    assert drained.state_changed_at is not None
    assert drained.resources == "language: ?java"
    assert drained.queues[0].slots == 2
    assert drained.properties == ["ssd"] and drained.rank == 4
    assert drained.inventory == "node/[core=2]"
    assert drained.generation == registered.generation

    resumed = admin.update_worker("w1", WorkerPatch(state=WorkerState.ACTIVE, rank=NULL))
    assert resumed.state is WorkerState.ACTIVE and resumed.state_reason is None
    assert resumed.rank is None and resumed.generation == registered.generation + 1
    with pytest.raises(ValidationFailed):
        admin.update_worker("w1", WorkerPatch(resources="language java"))
    with pytest.raises(NotFound):
        admin.update_worker("nobody", WorkerPatch(state=WorkerState.DISABLED))

    job = admin.submit_job(JobSpec(resources="language: java"))
    with WorkerClient(server.base_url, registered.token, "w1") as worker:
        pulled = worker.pull()
        assert pulled is not None and pulled.id == job.id
    with pytest.raises(Conflict):
        admin.delete_worker("w1")
    admin.delete_worker("w1", requeue=True)
    assert admin.get_job(job.id).state is JobState.WAITING
    with pytest.raises(NotFound):
        admin.get_worker("w1")


def test_registering_an_existing_name_is_a_conflict_unless_it_replaces(
    server: LiveServer, admin: AdminClient
) -> None:
    """As Grid Engine's ``qconf -ae`` answers "already exists" for a host that exists."""
    first = admin.register_worker(WorkerSpec(name="w1", resources="language: ?java", slots=2))
    assert first.token is not None and first.token_kept is False
    with pytest.raises(Conflict) as refused:
        admin.register_worker(WorkerSpec(name="w1", slots=8))
    assert refused.value.status == 409 and "'w1' already exists" in str(refused.value)
    assert admin.get_worker("w1").queues[0].slots == 2

    replaced = admin.register_worker(WorkerSpec(name="w1", slots=8), replace=True)
    assert replaced.token is None and replaced.token_kept is True
    assert replaced.queues[0].slots == 8 and replaced.resources == ""
    with WorkerClient(server.base_url, first.token, "w1") as worker:
        assert worker.heartbeat().worker == "w1"
