"""The reading methods of the client against a real `jobmatch serve`: categories and their
fit, Grid Engine values and parallel environments, and every list as a page."""

from __future__ import annotations

from app.client import (
    AdminClient,
    AttributeSpec,
    JobSpec,
    PeSpec,
    Role,
    SubmitterClient,
    TaskSpec,
    ValuesSpec,
    WorkerSpec,
)
from tests.live_server import LiveServer


def test_read_categories_values_and_pages(server: LiveServer, admin: AdminClient) -> None:
    admin.register_worker(WorkerSpec(name="w1", resources="language: ?java", slots=2))
    admin.register_worker(WorkerSpec(name="w2", resources="language: ?python"))
    admin.create_attribute(
        AttributeSpec(name="lic", shortcut="lic", type="INT", relop="<=", consumable="YES")
    )
    admin.set_global_values(ValuesSpec(complex_values={"lic": "4"}))
    admin.set_host_values("w1", ValuesSpec(load_values={"load_avg": "0.25"}))
    admin.put_pe("mpi", PeSpec(allocation_rule="$round_robin"))
    admin.register_task(TaskSpec(name="sbuild"))
    token = admin.issue_token(Role.SUBMITTER, "alice").token
    with SubmitterClient(server.base_url, token) as alice:
        job = alice.submit_job(JobSpec(resources="language: java"))
        page = alice.list_categories(limit=1)
        assert [c.id for c in page.items] == [job.category_id] and page.next_offset is None
        assert page.items[0].waiting == 1 and page.items[0].fitting_workers == 1
        category = alice.get_category(job.category_id)
        fit = {w.worker: (w.fits, w.reason) for w in category.workers}
        assert fit == {"w1": (True, None), "w2": (False, "job-requires-tag")}
        assert category.request.resources == "language:java"

        assert alice.get_global_values().complex_values == {"lic": "4"}
        assert alice.get_host_values("w1").load_values == {"load_avg": "0.25"}
        assert alice.get_queue_values("default", "w1").attributes["qname"] == "default"
        assert alice.get_pe("mpi").allocation_rule == "$round_robin"
        assert [pe.name for pe in alice.list_pes(limit=1).items] == ["mpi"]
        assert [t.name for t in alice.list_tasks().items] == ["sbuild"]
        attributes = alice.list_attributes(limit=10)
        assert len(attributes.items) == 10 and attributes.next_offset == 10
