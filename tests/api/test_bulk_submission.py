"""POST /v1/jobs/bulk (issue 38): many jobs in one transaction, with the outcome of one
POST /v1/jobs per body; Grid Engine array jobs (qsub -t, -tc) through it."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.api.app import create_app
from app.db.engine import Database
from app.db.models import Job, JobArray, JobEvent
from app.settings import Settings
from tests.support.http_api import assert_problem, register

#: Bodies of every outcome: a job a worker fits, one none fits ("No suitable worker
#: found"), a Grid Engine job (waits even when nothing fits), one of the same request
#: with another priority and command, and one with a constraint.
BODIES: list[dict[str, Any]] = [
    {"resources": "language: java; java: 12", "priority": 10},
    {"resources": "language: cobol"},
    {"hard": "arch=lx-amd64"},
    {"resources": "language: java; java: 12", "priority": 3, "command": ["true"]},
    {"constraint": {"properties": ["ssd"]}},
    {"resources": "language: cobol", "priority": -5},
    {},
]

#: What must be equal between a bulk submission and one submission per body.
_COMPARED = (
    "state",
    "priority",
    "slots",
    "category_id",
    "resources",
    "constraint",
    "constraint_syntax",
    "hard",
    "command",
    "failure_reason",
    "submitter",
    "array_id",
    "task_id",
)


def _history(client: TestClient, headers: dict[str, str], job_id: int) -> list[tuple[Any, ...]]:
    events = client.get(f"/v1/jobs/{job_id}/history", headers=headers).json()["events"]
    return [(e["kind"], e["worker"], e["detail"]) for e in events]


def _outcome(client: TestClient, headers: dict[str, str], job_id: int) -> dict[str, Any]:
    job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    return {
        **{name: job[name] for name in _COMPARED},
        "history": _history(client, headers, job_id),
    }


def test_bulk_equals_one_submission_per_body(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "w1", "language: java; java: 12")
    single = [client.post("/v1/jobs", json=b, headers=admin_headers) for b in BODIES]
    assert all(r.status_code == 201 for r in single), [r.text for r in single]
    bulk = client.post("/v1/jobs/bulk", json={"jobs": BODIES}, headers=admin_headers)
    assert bulk.status_code == 201, bulk.text
    answer = bulk.json()
    assert answer["count"] == len(BODIES)
    one_by_one = [_outcome(client, admin_headers, r.json()["id"]) for r in single]
    together = [_outcome(client, admin_headers, j["id"]) for j in answer["jobs"]]
    assert together == one_by_one
    assert [j["state"] for j in answer["jobs"]] == [o["state"] for o in one_by_one]
    assert [j["failure_reason"] for j in answer["jobs"]] == [
        o["failure_reason"] for o in one_by_one
    ]
    assert {o["state"] for o in one_by_one} == {"waiting", "failed"}
    ids = [j["id"] for j in answer["jobs"]]
    assert ids == sorted(ids), "body order"


def test_the_pull_takes_bulk_jobs_as_it_takes_single_ones(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: java; java: 12")
    answer = client.post("/v1/jobs/bulk", json={"jobs": BODIES}, headers=admin_headers).json()
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    # The best job the worker fits: priority 10, the first body.
    assert pulled.json()["id"] == answer["jobs"][0]["id"]


def test_one_bad_body_refuses_the_request_and_stores_nothing(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "w1", "language: java; java: 12")
    bodies = [{}, {}, {}, {"resources": "language: ;;;"}, {}]
    problem = assert_problem(
        client.post("/v1/jobs/bulk", json={"jobs": bodies}, headers=admin_headers), 422
    )
    assert problem["errors"][0]["field"] == "body.jobs.3.resources"
    schema = assert_problem(
        client.post(
            "/v1/jobs/bulk", json={"jobs": [{}, {"priority": "high"}]}, headers=admin_headers
        ),
        422,
    )
    assert schema["errors"][0]["field"] == "body.jobs.1.priority"
    # A per-job field of a request already checked is still checked per job.
    timeout = assert_problem(
        client.post(
            "/v1/jobs/bulk",
            json={"jobs": [{"command": ["a"]}, {"command": ["a"], "timeout": 0}]},
            headers=admin_headers,
        ),
        422,
    )
    assert timeout["errors"][0]["field"] == "body.jobs.1.timeout"
    empty = assert_problem(
        client.post("/v1/jobs/bulk", json={"jobs": []}, headers=admin_headers), 422
    )
    assert empty["errors"][0]["field"] == "body.jobs"
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0
        assert session.scalar(select(func.count()).select_from(JobEvent)) == 0


def test_array_jobs_expand_into_one_job_per_task(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "w1", "")
    body = {"jobs": [{"priority": 1}, {"tasks": "2-10:4", "task_concurrency": 2}, {}]}
    answer = client.post("/v1/jobs/bulk", json=body, headers=admin_headers).json()
    assert answer["count"] == 5
    tasks = [(j["array_id"] is not None, j["task_id"]) for j in answer["jobs"]]
    assert tasks == [(False, None), (True, 2), (True, 6), (True, 10), (False, None)]
    array_ids = {j["array_id"] for j in answer["jobs"][1:4]}
    assert len(array_ids) == 1
    shown = client.get(f"/v1/jobs/{answer['jobs'][2]['id']}", headers=admin_headers).json()
    assert (shown["array_id"], shown["task_id"]) == (array_ids.pop(), 6)
    assert shown["task_range"] == "2-10:4"
    with database.transaction(write=False) as session:
        array = session.scalars(select(JobArray)).one()
        assert (array.first_task, array.last_task, array.step) == (2, 10, 4)
        assert array.task_concurrency == 2


def test_array_notation_errors_name_qsub_t(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    problem = assert_problem(
        client.post("/v1/jobs/bulk", json={"jobs": [{}, {"tasks": "5-3"}]}, headers=admin_headers),
        422,
    )
    error = problem["errors"][0]
    assert error["field"] == "body.jobs.1.tasks"
    assert (error["notation"], error["position"], error["expected"]) == ("qsub -t", 2, "m >= 5")
    alone = assert_problem(
        client.post(
            "/v1/jobs/bulk", json={"jobs": [{"task_concurrency": 2}]}, headers=admin_headers
        ),
        422,
    )
    assert alone["errors"][0]["field"] == "body.jobs.0.task_concurrency"


def test_single_submission_refers_arrays_to_bulk(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    problem = assert_problem(
        client.post("/v1/jobs", json={"tasks": "1-3"}, headers=admin_headers), 422
    )
    assert problem["errors"][0]["field"] == "body.tasks"
    assert "/v1/jobs/bulk" in problem["detail"]


def test_limits_and_a_key_too_long(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    small = settings.model_copy(update={"max_bulk_jobs": 2, "max_bulk_tasks": 5})
    with TestClient(create_app(small, database=database)) as client:
        bodies = assert_problem(
            client.post("/v1/jobs/bulk", json={"jobs": [{}, {}, {}]}, headers=admin_headers),
            422,
        )
        assert bodies["errors"][0]["field"] == "body.jobs"
        assert "JOBMATCH_MAX_BULK_JOBS" in bodies["detail"]
        tasks = assert_problem(
            client.post(
                "/v1/jobs/bulk", json={"jobs": [{}, {"tasks": "1-5"}]}, headers=admin_headers
            ),
            422,
        )
        assert tasks["errors"][0]["field"] == "body.jobs.1.tasks"
        keyed = assert_problem(
            client.post(
                "/v1/jobs/bulk",
                json={"jobs": [{}]},
                headers={**admin_headers, "Idempotency-Key": "k" * 256},
            ),
            422,
        )
        assert keyed["errors"][0]["field"] == "header.Idempotency-Key"
        fits = client.post(
            "/v1/jobs/bulk", json={"jobs": [{"tasks": "1-5"}]}, headers=admin_headers
        )
        assert fits.status_code == 201
        assert fits.json()["count"] == 5


def test_submitters_may_bulk_submit_and_workers_may_not(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    alice = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    ).json()["token"]
    mine = client.post(
        "/v1/jobs/bulk", json={"jobs": [{}]}, headers={"Authorization": f"Bearer {alice}"}
    )
    assert mine.status_code == 201
    shown = client.get(f"/v1/jobs/{mine.json()['jobs'][0]['id']}", headers=admin_headers)
    assert shown.json()["submitter"] == "alice"
    worker = client.post("/v1/workers", json={"name": "w"}, headers=admin_headers).json()
    refused = client.post(
        "/v1/jobs/bulk",
        json={"jobs": [{}]},
        headers={"Authorization": f"Bearer {worker['token']}"},
    )
    assert refused.status_code == 403


def test_what_if_refuses_array_jobs_and_match_ignores_the_range(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """A what-if adds one job per body, so an array's tasks would be missing: refused. A
    dry-run match answers the candidates, which are every task's."""
    register(client, admin_headers, "w1", "")
    problem = assert_problem(
        client.post("/v1/whatif", json={"add_jobs": [{}, {"tasks": "1-3"}]}, headers=admin_headers),
        422,
    )
    assert problem["errors"][0]["field"] == "body.add_jobs.1.tasks"
    matched = client.post("/v1/match", json={"tasks": "1-3"}, headers=admin_headers)
    assert matched.status_code == 200, matched.text
    assert [c["worker"] for c in matched.json()["items"]] == ["w1"]


def test_repeated_bodies_equal_one_submission_each(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """A bulk request mostly repeats one body: each repeat is asked about once (the spec
    before it answers for it) and a column every job shares is bound once; the jobs are
    still those of one submission per body. Once every body is the same (every column
    shared), once with runs of bodies that differ in a per-job field or in their
    request."""
    register(client, admin_headers, "w1", "language: java; java: 12")
    java = {"resources": "language: java; java: 12"}
    for bodies in (
        [java] * 4,
        [java, java, {**java, "priority": 3}, java, {"resources": "language: cobol"}, {}, {}],
    ):
        single = [client.post("/v1/jobs", json=b, headers=admin_headers) for b in bodies]
        assert all(r.status_code == 201 for r in single), [r.text for r in single]
        bulk = client.post("/v1/jobs/bulk", json={"jobs": bodies}, headers=admin_headers)
        assert bulk.status_code == 201, bulk.text
        one_by_one = [_outcome(client, admin_headers, r.json()["id"]) for r in single]
        together = [_outcome(client, admin_headers, j["id"]) for j in bulk.json()["jobs"]]
        assert together == one_by_one


def test_a_job_body_hands_every_field_of_a_spec_to_the_services() -> None:
    """JobIn.spec reads the body by attribute: every field of JobSpec is a field of the
    body, and the body has no other but the array's."""
    from app.api.schemas.jobs import ARRAY_FIELDS, SPEC_FIELDS, JobIn

    assert set(JobIn.model_fields) - ARRAY_FIELDS == set(SPEC_FIELDS)
    body = JobIn(resources="os: linux", priority=4, command=["x"], constraint={"not": []})
    spec = body.spec()
    assert {name: getattr(spec, name) for name in SPEC_FIELDS} == body.model_dump(
        exclude=set(ARRAY_FIELDS)
    )
