"""app.client against a real `jobmatch serve` on loopback, on every configured database:
a round trip per role, typed errors from the real server, and retries across a server that
is down at first.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx2
import pytest

from app.client import (
    AdminClient,
    AttributeSpec,
    Conflict,
    Forbidden,
    JobSpec,
    JobState,
    NotFound,
    PeSpec,
    QueueSpec,
    RetryPolicy,
    Role,
    ServerUnreachable,
    SubmitterClient,
    TaskSpec,
    Unauthorized,
    ValidationFailed,
    ValuesSpec,
    WorkerClient,
    WorkerSpec,
)
from app.db.engine import Database
from tests.client.conftest import ADMIN
from tests.live_server import LiveServer

NODE = "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]"


def test_admin_round_trip(server: LiveServer, admin: AdminClient) -> None:
    assert admin.health()["status"] == "ok"
    assert admin.ready()["status"] == "ready"
    assert "jobmatch" in admin.metrics()

    # Workers: tags and Flux properties, a Grid Engine queue, an RFC 14 inventory.
    w1 = admin.register_worker(
        WorkerSpec(
            name="w1",
            resources="os: ?linux; lang: ?python3",
            slots=2,
            rank=0,
            properties=["ssd"],
            queues=[QueueSpec(name="all.q", slots=2)],
        )
    )
    assert w1.token and w1.queues[0].queue == "all.q" and w1.properties == ["ssd"]
    n0 = admin.register_worker(WorkerSpec(name="n0", slots=8, rank=1, inventory=NODE))
    assert n0.free["core"] == 8
    page = admin.list_workers(limit=1)
    assert len(page.items) == 1 and page.next_offset == 1
    assert admin.get_worker("n0").inventory is not None

    # Tokens.
    issued = admin.issue_token(Role.SUBMITTER, "alice", label="ci")
    assert issued.role is Role.SUBMITTER and issued.token
    assert issued.id in {token.id for token in admin.list_tokens().items}
    assert admin.revoke_token(issued.id).revoked_at is not None

    # Grid Engine: an attribute, values, a PE.
    lic = AttributeSpec(
        name="lic", shortcut="lic", type="INT", relop="<=", requestable="YES", consumable="YES"
    )
    assert admin.create_attribute(lic).name == "lic"
    assert admin.change_attribute(AttributeSpec(**{**lic.__dict__, "urgency": 5})).urgency == 5
    assert admin.get_attribute("lic").consumable == "YES"
    assert any(a.name == "slots" and a.builtin for a in admin.list_attributes(limit=100).items)
    admin.set_global_values(ValuesSpec(complex_values={"lic": "3"}))
    admin.set_host_values("w1", ValuesSpec(complex_values={"lic": "2"}))
    admin.set_queue_values("all.q", "w1", ValuesSpec(complex_values={"lic": "1"}))
    assert admin.put_pe("mpi", PeSpec(allocation_rule="$round_robin", slots=8)).slots == 8
    assert [pe.name for pe in admin.list_pes().items] == ["mpi"]

    # debusine: a task type, static metadata.
    requirements = {"ge": ["system:cpu_count", 4]}
    task = admin.register_task(TaskSpec(name="sbuild", requirements=requirements))
    assert task.version >= 1 and admin.get_task("sbuild").requirements == requirements
    assert [t.name for t in admin.list_tasks().items] == ["sbuild"]
    assert w1.token is not None
    with WorkerClient(server.base_url, w1.token, "w1") as worker:
        worker.report_metadata({"system": {"cpu_count": 8}, "sbuild": {"version": task.version}})
    admin.set_static_metadata("w1", {"site": "lab"})
    metadata = admin.get_metadata("w1")
    assert metadata.static == {"site": "lab"} and "sbuild" in metadata.namespaces

    # Jobs of each notation family.
    jobs = {
        "tags": admin.submit_job(JobSpec(resources="os: linux", priority=5)),
        "flux requires": admin.submit_job(JobSpec(requires="ssd")),
        "flux constraint": admin.submit_job(JobSpec(constraint={"properties": ["ssd"]})),
        "flux shape": admin.submit_job(JobSpec(shape="node=2/slot/core=2")),
        "debusine task": admin.submit_job(JobSpec(task="sbuild", command=["true"], timeout=60)),
        "grid engine": admin.submit_job(JobSpec(hard="lic=1")),
        "grid engine pe": admin.submit_job(JobSpec(pe="mpi", pe_slots="2")),
    }
    assert {k: (j.state, j.failure_reason) for k, j in jobs.items()} == dict.fromkeys(
        jobs, (JobState.WAITING, None)
    )
    tags = jobs["tags"]
    assert [c.worker for c in admin.job_candidates(tags.id).items] == ["w1"]
    explained = admin.explain_job(tags.id, worker="n0")
    assert [w.worker for w in explained.workers] == ["n0"]
    assert explained.workers[0].eligible is False and explained.workers[0].clauses
    assert [e.kind for e in admin.job_history(tags.id).events] == ["submitted"]
    assert [c.worker for c in admin.match(JobSpec(requires="ssd")).items] == ["w1"]
    listed = admin.list_jobs(state=JobState.WAITING, limit=100)
    assert {job.id for job in listed.items} == {job.id for job in jobs.values()}

    # Flux tools.
    assert admin.expand_shape("slot=4/node").resources[0]["type"] == "slot"
    assert admin.compile_requires("ssd").constraint == {"properties": ["ssd"]}
    assert admin.validate_constraint({"properties": ["ssd"]}).constraint

    # The scheduler and leases: one more node makes the two-node shape placeable.
    admin.register_worker(WorkerSpec(name="n1", slots=8, rank=2, inventory=NODE))
    shaped = admin.allocate_job(jobs["flux shape"].id)
    assert shaped.state is JobState.RUNNING
    assert {r["node"] for r in admin.job_allocation(shaped.id).R_lite} == {"n0", "n1"}
    run = admin.run_schedule()
    assert run.considered >= 0 and run.dispatched >= 0
    assert admin.expire_leases().expired >= 0
    assert admin.cancel_job(tags.id).state is JobState.CANCELLED

    # Clean-up operations.
    with pytest.raises(Conflict, match="parallel environment 'mpi'"):
        admin.delete_pe("mpi")  # a job asks for it
    admin.put_pe("smp", PeSpec(allocation_rule="$pe_slots"))
    admin.delete_pe("smp")
    assert [pe.name for pe in admin.list_pes().items] == ["mpi"]
    with pytest.raises(Conflict):
        admin.delete_attribute("lic")  # requested by a waiting job
    with pytest.raises(Conflict):
        admin.delete_attribute("arch")  # a built-in


def test_worker_round_trip(server: LiveServer, admin: AdminClient) -> None:
    registered = admin.register_worker(WorkerSpec(name="w1", slots=2, resources="os: linux"))
    assert registered.token is not None
    first = admin.submit_job(JobSpec(resources="os: linux", command=["echo", "hi"], priority=2))
    second = admin.submit_job(JobSpec(resources="os: linux", priority=1))
    with WorkerClient(server.base_url, registered.token, "w1") as worker:
        reported = worker.report_metadata({"system": {"cpu_count": 8}})
        assert reported.effective["system:cpu_count"] == 8
        assert worker.own_metadata().worker == "w1"
        assert worker.heartbeat().worker == "w1"
        pulled = worker.pull()
        assert pulled is not None and pulled.id == first.id and pulled.command == ["echo", "hi"]
        assert pulled.state is JobState.RUNNING and pulled.worker == "w1"
        done = worker.finish_job(first.id, "failed", reason="exit 2", exit_code=2, output="x")
        assert (done.state, done.exit_code, done.failure_reason) == (JobState.FAILED, 2, "exit 2")
        again = worker.pull()
        assert again is not None and again.id == second.id
        returned = worker.return_job(second.id, reason="shutting down")
        assert returned.state is JobState.WAITING
        history = admin.job_history(second.id).events
        assert [event.kind for event in history][-1] == "returned"
        assert (worker.pull() or pytest.fail("the returned job comes back")).id == second.id
        assert worker.finish_job(second.id, "finished").state is JobState.FINISHED
        assert worker.pull() is None
        # A worker reads only its own metadata, and its token is no admin's.
        with pytest.raises(Forbidden, match="w1"):
            worker.get_metadata("w2")
    with AdminClient(server.base_url, registered.token) as pretender, pytest.raises(Forbidden):
        pretender.list_tokens()


def test_typed_errors_from_the_real_server(server: LiveServer, admin: AdminClient) -> None:
    admin.register_worker(WorkerSpec(name="w1"))
    with (
        SubmitterClient(server.base_url, "not-a-token") as stranger,
        pytest.raises(Unauthorized) as refused,
    ):
        stranger.list_jobs()
    assert refused.value.status == 401 and "token" in refused.value.detail

    alice_token = admin.issue_token(Role.SUBMITTER, "alice").token
    with AdminClient(server.base_url, alice_token) as alice:
        mine = alice.submit_job(JobSpec())
        assert mine.submitter == "alice"
        with pytest.raises(Forbidden) as forbidden:
            alice.run_schedule()  # an AdminClient with a submitter's token is still refused
        assert forbidden.value.status == 403

    with pytest.raises(NotFound):
        admin.get_job(999_999)
    done = admin.cancel_job(mine.id)
    with pytest.raises(Conflict) as conflict:
        admin.cancel_job(done.id)
    assert conflict.value.status == 409

    with pytest.raises(ValidationFailed) as invalid:
        admin.submit_job(JobSpec(shape="slot=4/node{"))
    error = invalid.value.errors[0]
    assert error.field == "body.shape" and error.position is not None
    assert invalid.value.title == "Invalid notation"


def test_a_call_waits_for_a_server_that_is_down_then_up(
    database_url: str, database: Database, tmp_path: Path
) -> None:
    later = LiveServer(database_url, tmp_path / "server.log", admin_token=ADMIN)
    sent: list[httpx2.Request] = []

    class Counting(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            sent.append(request)
            return super().handle_request(request)

    policy = RetryPolicy(attempts=100, timeout=60, wait_initial=0.05, wait_max=0.5)
    client = AdminClient(later.base_url, ADMIN, retry=policy, transport=Counting())
    answers: list[object] = []
    caller = threading.Thread(target=lambda: answers.append(client.list_workers()))
    started = time.monotonic()
    caller.start()
    time.sleep(1.0)
    assert caller.is_alive(), "the call retries while nothing listens"
    try:
        later.start()
        caller.join(timeout=60)
        assert answers and answers[0].items == []  # type: ignore[attr-defined]
        assert len(sent) >= 3 and time.monotonic() - started >= 1.0
        # A refused token is answered at once and never sent twice.
        before = len(sent)
        refused = AdminClient(later.base_url, "wrong", retry=policy, transport=Counting())
        with refused, pytest.raises(Unauthorized):
            refused.list_workers()
        assert len(sent) == before + 1
    finally:
        client.close()
        later.stop()


def test_no_server_at_all_is_one_clear_error(tmp_path: Path) -> None:
    policy = RetryPolicy(attempts=3, timeout=5, wait_initial=0.01, wait_max=0.02)
    client = AdminClient("http://127.0.0.1:9", ADMIN, retry=policy)
    with client, pytest.raises(ServerUnreachable) as raised:
        client.submit_job(JobSpec())
    assert str(raised.value).startswith("cannot reach the jobmatch server at http://127.0.0.1:9")
    assert raised.value.sent is False


def test_bulk_submission_and_array_jobs(server: LiveServer, admin: AdminClient) -> None:
    admin.register_worker(WorkerSpec(name="w1", resources="os: ?linux", slots=2))
    answer = admin.submit_jobs(
        [
            JobSpec(resources="os: linux", priority=5),
            {"resources": "os: beos"},
            JobSpec(command=["true"], tasks="1-5:2", task_concurrency=1),
        ]
    )
    assert answer.count == 5
    assert [job.state for job in answer.jobs] == [JobState.WAITING, JobState.FAILED] + [
        JobState.WAITING
    ] * 3
    assert answer.jobs[1].failure_reason == "No suitable worker found"
    assert [job.task_id for job in answer.jobs] == [None, None, 1, 3, 5]
    task = admin.get_job(answer.jobs[3].id)
    assert (task.array_id, task.task_id, task.task_range) == (answer.jobs[3].array_id, 3, "1-5:2")
    with pytest.raises(ValidationFailed) as refused:
        admin.submit_jobs([JobSpec(), JobSpec(tasks="0-3")])
    assert "jobs.1.tasks" in str(refused.value)
