"""The admin client's what-if against a real `jobmatch serve`: a change set built from
the request dataclasses, the answer parsed into the client's models, nothing stored."""

from __future__ import annotations

from app.client import (
    NULL,
    AdminClient,
    GroupWeightChange,
    JobSpec,
    JobState,
    QuotaSetText,
    ValidationFailed,
    ValuesChange,
    WeightChange,
    WhatIfSpec,
    WorkerChange,
    WorkerSpec,
    WorkerState,
)
from tests.live_server import LiveServer


def test_what_if_from_dataclasses(server: LiveServer, admin: AdminClient) -> None:
    admin.register_worker(
        WorkerSpec(name="w1", resources="language: ?java", state=WorkerState.DRAINING)
    )
    waiting = admin.submit_job(JobSpec(resources="language: python"))
    assert waiting.state is JobState.FAILED  # nothing runs python yet

    java = admin.submit_job(JobSpec(resources="language: java"))
    answer = admin.what_if(
        WhatIfSpec(
            change_workers=[WorkerChange(name="w1", state=WorkerState.ACTIVE, slots=2)],
            add_workers=[WorkerSpec(name="py", resources="language: ?python")],
            add_jobs=[JobSpec(resources="language: python")],
            explain_job=java.id,
        )
    )

    (added,) = answer.added_jobs
    assert added.state is JobState.WAITING and added.index == 0
    assert answer.runnable_now == sorted([java.id, added.id])
    assert answer.no_longer_runnable == []
    assert answer.provisional_ids
    assert answer.explain_job is not None
    assert [(c.worker, c.state) for c in answer.explain_job.after] == [("w1", WorkerState.ACTIVE)]
    assert {(p.worker, p.job) for p in answer.first_pulls} == {("w1", java.id), ("py", added.id)}
    # Nothing was stored: w1 still drains on one slot, py does not exist.
    w1 = admin.get_worker("w1")
    assert (w1.state, w1.queues[0].slots) == (WorkerState.DRAINING, 1)
    assert [w.name for w in admin.list_workers().items] == ["w1"]


def test_values_and_quota_sets_from_dataclasses(server: LiveServer, admin: AdminClient) -> None:
    """A what-if of Grid Engine values and quota sets, built from the client's classes;
    each is refused by the server's own check, so the body reached it as the API has it."""
    admin.register_worker(WorkerSpec(name="h1"))
    answer = admin.what_if(
        WhatIfSpec(
            set_values=[ValuesChange(level="host", host="h1", load_values={"arch": "lx-amd64"})],
            add_quota_sets=[QuotaSetText("{\n name per_user\n limit users {*} to slots=1\n}\n")],
        )
    )
    assert [p.worker for p in answer.first_pulls] == ["h1"]
    assert admin.list_quota_sets().items == []
    try:
        admin.what_if(WhatIfSpec(set_values=[ValuesChange(level="host", host="ghost")]))
    except ValidationFailed as error:
        assert [f.field for f in error.errors] == ["body.set_values.0"]
    else:
        raise AssertionError("a what-if that sets values of an unknown host was accepted")


def test_a_refused_item_is_a_validation_error(server: LiveServer, admin: AdminClient) -> None:
    try:
        admin.what_if({"drain_workers": ["ghost"]})
    except ValidationFailed as error:
        assert [f.field for f in error.errors] == ["body.drain_workers.0"]
    else:
        raise AssertionError("a what-if that drains an unknown worker was accepted")


def test_weights_and_groups_from_dataclasses(server: LiveServer, admin: AdminClient) -> None:
    """Groups in a what-if, built from the client's classes (``NULL``: out of a group):
    the server takes them, stores nothing, and refuses a bad group weight naming it."""
    admin.set_share_weight("alice", 1, group="course-a")
    admin.register_worker(WorkerSpec(name="w"))
    answer = admin.what_if(
        WhatIfSpec(
            set_weights=[WeightChange("alice", 2, group=NULL), WeightChange("bob", 1, "course-b")],
            set_group_weights=[GroupWeightChange("course-b", 3)],
            pull_workers=["w"],
        )
    )
    assert [(p.worker, p.job) for p in answer.first_pulls] == [("w", None)]
    shares = admin.list_shares()
    assert [(s.submitter, s.group, s.weight) for s in shares.submitters] == [
        ("alice", "course-a", 1.0)
    ]
    assert [g.group for g in shares.groups] == ["course-a"]
    try:
        admin.what_if(WhatIfSpec(set_group_weights=[GroupWeightChange("course-b", 0)]))
    except ValidationFailed as error:
        assert [f.field for f in error.errors] == ["body.set_group_weights.0.weight"]
    else:
        raise AssertionError("a what-if with a group weight of 0 was accepted")
