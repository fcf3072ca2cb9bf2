"""Issue 40's "Done when", against a real `jobmatch serve` through the admin client: a
java-12 worker, a busy java-11 worker, a 2-node cluster, and jobs for java 11, 12, 17 and
a 3-node shape. Demand says java 17 and the 3-node job never run today and the java-11
jobs wait for capacity (and how much); with the templates java17-box and node-8core it
suggests one of each, which, registered for real, start exactly those two jobs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.client import (
    AdminClient,
    JobSpec,
    JobState,
    Role,
    TemplateSpec,
    ValidationFailed,
    WorkerClient,
    WorkerSpec,
)
from tests.live_server import LiveServer

JAVA17_BOX = TemplateSpec(resources="language: ?java; java: ?17", slots=4, cost=1.0)
NODE_8CORE = TemplateSpec(inventory="node/[core=8]", slots=8, cost=3.0)


@contextmanager
def _worker(server: LiveServer, admin: AdminClient, name: str) -> Iterator[WorkerClient]:
    token = admin.issue_token(Role.WORKER, name).token
    with WorkerClient(server.base_url, token, name) as worker:
        yield worker


def _pull(server: LiveServer, admin: AdminClient, name: str) -> int | None:
    with _worker(server, admin, name) as worker:
        job = worker.pull()
    return job.id if job is not None else None


def test_demand_and_the_suggested_workers_on_a_live_server(
    server: LiveServer, admin: AdminClient
) -> None:
    admin.put_template("java17-box", JAVA17_BOX)
    admin.put_template("node-8core", NODE_8CORE)
    assert [t.name for t in admin.list_templates().items] == ["java17-box", "node-8core"]
    admin.register_worker(WorkerSpec(name="j12", resources="language: ?java; java: ?12"))
    admin.register_worker(WorkerSpec(name="j11", resources="language: ?java; java: ?11"))
    for node in ("n1", "n2"):
        admin.register_worker(WorkerSpec(name=node, inventory="node/[core=8]", slots=8))
    busy = admin.submit_job(JobSpec(resources="language: java; java: 11"))
    assert _pull(server, admin, "j11") == busy.id
    java11 = [admin.submit_job(JobSpec(resources="language: java; java: 11")) for _ in range(3)]
    java12 = admin.submit_job(JobSpec(resources="language: java; java: 12"))
    java17 = admin.submit_job(JobSpec(resources="language: java; java: 17"))
    three = admin.submit_job(JobSpec(shape="node=3/slot/core=8"))
    assert java17.state is JobState.WAITING  # a template could run it

    today = admin.demand()
    answers = {item.category_id: item for item in today.items}
    assert answers[java17.category_id].answer == "never"
    assert answers[java17.category_id].reasons[0] == "no worker offers tag '17' in group 'java'"
    assert answers[three.category_id].answer == "never"
    waiting11 = answers[java11[0].category_id]
    assert (waiting11.answer, waiting11.waiting, waiting11.need.slots) == ("capacity", 3, 3)
    assert answers[java12.category_id].answer == "ready"
    assert today.jobs == {"never": 2, "capacity": 3, "policy": 0, "ready": 1}
    assert today.suggestion is None

    planned = admin.demand(every_template=True).suggestion
    assert planned is not None
    assert [(m.template, m.workers) for m in planned.mix] == [("java17-box", 1), ("node-8core", 1)]
    assert [(u.category_id, u.jobs) for u in planned.unrunnable] == [(java11[0].category_id, 3)]
    alone = {t.template: (t.workers, t.jobs) for t in planned.templates}
    assert alone == {"java17-box": (1, 1), "node-8core": (1, 1)}
    same = admin.demand(["node-8core", "java17-box"]).suggestion
    assert same is not None and same.mix == planned.mix
    try:
        admin.demand(["nope"])
    except ValidationFailed as refused:
        assert "nope" in str(refused)
    else:
        raise AssertionError("an unknown template was not refused")

    # Added for real, the suggested workers start exactly the two jobs.
    admin.register_worker(WorkerSpec(name="java17-1", resources="language: ?java; java: ?17"))
    admin.register_worker(WorkerSpec(name="n3", inventory="node/[core=8]", slots=8))
    assert admin.allocate_job(three.id).state is JobState.RUNNING
    assert _pull(server, admin, "java17-1") == java17.id
    assert _pull(server, admin, "java17-1") is None
    assert _pull(server, admin, "n3") is None
    after = admin.demand(every_template=True)
    assert after.jobs == {"never": 0, "capacity": 3, "policy": 0, "ready": 1}
    admin.delete_template("node-8core")
    assert [t.name for t in admin.list_templates().items] == ["java17-box"]
    assert admin.get_template("java17-box").cost == 1.0
