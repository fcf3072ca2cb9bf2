"""The console's read services (app/matching/console.py) on the small console cluster:
counts by state, dispatches per minute, the queue by category, a worker's fit, and the fit
matrix, which must say what the v_category_fit view says; requests in the text of the
notation they were written in."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import JobEventKind, JobState, Worker, WorkerState
from app.matching import console, history, submission, workers
from app.matching.gridengine import admin as gridengine_admin
from app.matching.gridengine.values import resolve_target
from app.matching.requests import JobSpec
from app.matching.worker_lifecycle import WorkerChanges, update_worker
from app.matching.workers import WorkerSpec
from tests.support.console_cluster import ConsoleCluster, load_console_cluster

pytestmark = pytest.mark.db


@pytest.fixture
def cluster(database: Database) -> ConsoleCluster:
    return load_console_cluster(database)


def test_the_overview_counts_what_each_role_may_see(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        everything = console.overview(session, submitter=None, now=utcnow())
        alice = console.overview(session, submitter="alice", now=utcnow())
        bob = console.overview(session, submitter="bob", now=utcnow())
        waiting = console.recent_jobs(session, submitter=None, state=JobState.WAITING)
    assert everything.workers_by_state["active"] == 4
    # Nine demo jobs (two of them failed: no worker could ever run them) and three more.
    assert sum(everything.jobs_by_state.values()) == 12
    assert everything.jobs_by_state["running"] == 1
    assert everything.jobs_by_state["failed"] == 2
    assert everything.oldest_waiting is not None
    assert everything.oldest_waiting.id == min(line.id for line in waiting)  # the first demo job
    assert (alice.jobs_by_state["waiting"], alice.jobs_by_state["running"]) == (1, 1)
    assert alice.oldest_waiting is not None
    assert alice.oldest_waiting.id == cluster.alice_waiting
    assert sum(bob.jobs_by_state.values()) == 1


def test_dispatches_are_counted_per_minute_from_the_history(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        now = utcnow()
        everything = console.overview(session, submitter=None, now=now)
        bob = console.overview(session, submitter="bob", now=now)
        (dispatched,) = [
            event.at
            for event in history.events(session, cluster.alice_running)
            if event.kind is JobEventKind.DISPATCHED
        ]
    minutes = everything.dispatches_per_minute
    assert len(minutes) == console.DISPATCH_WINDOW_MINUTES
    assert minutes[-1][0] == now.replace(second=0, microsecond=0)
    # alice's pulled job, in the minute its history says, and nothing else.
    assert dict(minutes)[dispatched.replace(second=0, microsecond=0)] == 1
    assert sum(count for _minute, count in minutes) == 1
    assert everything.dispatch_rate == pytest.approx(1 / 15)
    assert sum(count for _minute, count in bob.dispatches_per_minute) == 0


def test_the_fit_matrix_is_the_view_v_category_fit(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        matrix = console.fit_matrix(session, submitter=None)
        view = {
            (category_id, worker): (reason if not fits else None)
            for category_id, worker, fits, reason in session.execute(
                text("SELECT category_id, worker_name, fits, reason FROM v_category_fit")
            )
        }
    assert matrix.workers == ["arm-runner", "docs-worker", "gpu-node", "java-box"]
    assert len(matrix.categories) == 8  # the live ones: waiting or running jobs
    assert matrix.cells == {cell: view[cell] for cell in matrix.cells}
    assert sum(matrix.reason_counts.values()) == len(matrix.cells)
    assert matrix.reason_counts["fits"] == sum(1 for r in matrix.cells.values() if r is None)


def test_a_submitter_s_matrix_holds_its_own_categories(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        alice = console.fit_matrix(session, submitter="alice")
        requests = [request for _id, request in alice.categories]
    assert requests == ["arch:~x86", "language:python;python:3.7"]


def test_the_queue_says_why_each_category_waits(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction() as session:
        update_worker(session, "gpu-node", WorkerChanges(state=WorkerState.DISABLED), by="admin")
    with database.transaction(write=False) as session:
        lines = {line.request: line for line in console.queue_by_category(session, submitter=None)}
        (alice,) = console.queue_by_category(session, submitter="alice")
    gpu = lines["gpu:cuda;language:python"]
    # Its one worker is disabled; the three others lack the tag the job requires.
    assert (gpu.fitting_workers, gpu.top_reason, gpu.top_reason_workers) == (
        0,
        "job-requires-tag",
        3,
    )
    assert gpu.why_waiting == "the job requires a tag the worker does not offer (3 workers)"
    assert (alice.request, alice.waiting, alice.fitting_workers) == ("arch:~x86", 1, 2)
    assert alice.why_waiting.startswith("2 workers fit")
    # The demo's arch:~x86 job waits in the same category: counted for the admin only.
    assert lines["arch:~x86"].waiting == 2


def test_a_worker_s_page_lists_its_running_jobs_and_its_fit(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        worker = session.query(Worker).filter_by(name="docs-worker").one()
        everything = console.worker_detail(session, worker, submitter=None)
        bob = console.worker_detail(session, worker, submitter="bob")
    assert [job.id for job in everything.running] == [cluster.alice_running]
    assert (everything.row.slots_used, everything.row.slots_total) == (1, 2)
    assert bob.running == []
    reasons = {fit.request: fit.reason for fit in everything.misfitting}
    assert reasons["gpu:cuda;language:python"] == "job-requires-tag"
    assert reasons["java:?17;language:java · 3\u00a0slots"] == "too-few-slots"
    assert all(fit.words != fit.reason for fit in everything.misfitting)
    assert "language:python;python:3.7" in {fit.request for fit in everything.fitting}


def test_jobs_and_their_visibility(database: Database, cluster: ConsoleCluster) -> None:
    with database.transaction(write=False) as session:
        alice = console.recent_jobs(session, submitter="alice", state=None)
        running = console.recent_jobs(session, submitter=None, state=None)
        assert [line.id for line in alice] == [cluster.alice_waiting, cluster.alice_running]
        assert {line.worker for line in alice} == {None, "docs-worker"}
        assert len(running) == 12
        assert console.visible_job(session, cluster.bob_job, submitter="alice") is None
        seen = console.visible_job(session, cluster.alice_running, submitter="alice")
        assert seen is not None and seen.worker == "docs-worker"
        assert console.visible_job(session, 10**9, submitter=None) is None


def test_a_category_page_counts_the_submitter_s_own_jobs(
    database: Database, cluster: ConsoleCluster
) -> None:
    with database.transaction(write=False) as session:
        (line,) = console.queue_by_category(session, submitter="alice")
        everything = console.category_page(session, line.category_id, submitter=None)
        alice = console.category_page(session, line.category_id, submitter="alice")
        assert console.category_page(session, line.category_id, submitter="bob") is None
        assert console.category_page(session, 10**9, submitter=None) is None
    assert everything is not None and alice is not None
    assert (everything.waiting, alice.waiting) == (2, 1)
    assert {fit.worker: fit.fits for fit in alice.fit} == {
        "arm-runner": True,
        "docs-worker": True,
        "gpu-node": False,
        "java-box": False,
    }


def test_requests_are_shown_in_the_notation_they_were_written_in(
    database: Database, cluster: ConsoleCluster
) -> None:
    """A job's row keeps what was submitted; a category keeps the canonical JSON, shown
    as the shape or RFC 35 text that compiles back to it (JSON only when none does)."""
    command = ["python3", "-c", 'print("hi")']
    specs = {
        "shape": JobSpec(shape="node=3/slot/core=8"),
        "requires": JobSpec(requires="ssd,ib | host:node[1-4]", shape="slot/core=2"),
        "constraint": JobSpec(constraint={"properties": ["ssd"]}),
        "labelled": JobSpec(
            jobspec=[
                {"type": "node", "count": 1, "label": "n", "with": [{"type": "core", "count": 1}]}
            ]
        ),
        "command": JobSpec("language: python", command=command, slots=2),
        "gridengine": JobSpec(hard="arch=lx-amd64"),
    }
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node0", slots=8, inventory="node/core=32"))
        jobs = {
            name: submission.submit_job(session, spec, submitter="carol")
            for name, spec in specs.items()
        }
        lines = {line.id: line for line in console.recent_jobs(session, submitter=None, state=None)}
        requests = console.category_requests(session, [job.category_id for job in jobs.values()])
        shown = {name: requests[job.category_id] for name, job in jobs.items()}
        summaries = {name: lines[job.id].request for name, job in jobs.items()}
        commands = {name: lines[job.id].command for name, job in jobs.items()}
    assert shown["shape"] == "shape node=3/slot/core=8"
    assert shown["requires"] == "requires ib,ssd | host:node[1-4] · shape slot/core=2"
    assert shown["constraint"] == "requires ssd"
    # A label on a node has no shape: the RFC 14 JSON is shown, named.
    assert shown["labelled"].startswith('jobspec [{"')
    assert shown["gridengine"] == "-l arch=lx-amd64"
    assert summaries["shape"] == "shape node=3/slot/core=8"
    assert summaries["requires"] == "requires ssd,ib | host:node[1-4] · shape slot/core=2"
    assert summaries["constraint"] == 'constraint {"properties": ["ssd"]}'
    assert summaries["command"] == "language: python · 2\u00a0slots"
    assert summaries["gridengine"] == "-l arch=lx-amd64"
    assert commands["command"] == "python3 -c 'print(\"hi\")'"
    assert commands["shape"] is None
    spec_summary = console.spec_summary(JobSpec(shape="node=2/slot/core=4", slots=1))
    assert spec_summary == "shape node=2/slot/core=4"


def test_a_worker_s_page_shows_what_it_offers(database: Database, cluster: ConsoleCluster) -> None:
    with database.transaction() as session:
        workers.upsert_worker(
            session,
            WorkerSpec(
                name="node0", rank=3, properties=("ssd",), slots=8, inventory="node/core=32"
            ),
        )
        target = resolve_target(session, "host", "node0", None)
        gridengine_admin.apply_values(session, target, {"complex_values": {"h_vmem": "64G"}})
        worker = session.query(Worker).filter_by(name="node0").one()
        detail = console.worker_detail(session, worker, submitter=None)
    assert (detail.rank, detail.description.properties) == (3, ["ssd"])
    assert detail.description.inventory == "node/core=32"
    assert [(q.queue, q.slots) for q in detail.description.queues] == [("default", 8)]
    assert [(v.attribute, v.kind, v.text) for v in detail.value_rows] == [
        ("h_vmem", "complex_values", "64G")
    ]


def test_the_sparkline_scales_to_the_busiest_minute(database: Database) -> None:
    minutes = [(utcnow(), count) for count in (0, 1, 4, 8)]
    overview = console.Overview({}, {}, minutes, None)
    assert overview.dispatch_peak == 8
    assert [overview.bar_tenths(count) for _at, count in minutes] == [0, 1, 5, 10]
    assert console.Overview({}, {}, [(utcnow(), 0)], None).bar_tenths(0) == 0
