"""A scenario's workers, jobs and tasks are the API's request bodies: the runner knows
exactly the fields of ``POST /v1/workers``, ``POST /v1/jobs`` and ``POST /v1/tasks``,
so a case cannot describe something the API would not take."""

from __future__ import annotations

import pytest

from app.api.routes.workers import worker_spec as api_worker_spec
from app.api.schemas.jobs import ARRAY_FIELDS, JobIn
from app.api.schemas.tasks import TaskIn
from app.api.schemas.workers import WorkerIn
from app.matching.scenarios.bodies import (
    JOB_FIELDS,
    TASK_FIELDS,
    WORKER_FIELDS,
    job_spec,
    worker_spec,
)
from app.matching.scenarios.cases import ScenarioError


def test_the_runner_knows_the_fields_of_the_api_bodies() -> None:
    assert set(WORKER_FIELDS) == set(WorkerIn.model_fields)
    # A scenario's job is one POST /v1/jobs body: an array job's fields are the bulk
    # submission's, which that route refuses.
    assert set(JOB_FIELDS) == set(JobIn.model_fields) - ARRAY_FIELDS
    assert set(TASK_FIELDS) == set(TaskIn.model_fields)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "w1"},
        {"name": "node0", "rank": 0, "properties": ["ssd"], "slots": 8, "inventory": "node/core=4"},
        {"name": "exec1", "queues": [{"name": "all.q", "slots": 4}], "state": "draining"},
    ],
)
def test_a_worker_body_gives_the_spec_the_route_gives(body: dict[str, object]) -> None:
    assert worker_spec(body) == api_worker_spec(WorkerIn.model_validate(body))


def test_a_job_body_gives_the_spec_the_route_gives() -> None:
    body = {"resources": "language: java", "priority": 3, "requires": "ssd", "slots": 2}
    assert job_spec(body) == JobIn.model_validate(body).spec()


def test_a_field_the_api_does_not_have_is_refused() -> None:
    with pytest.raises(ScenarioError, match="unknown field"):
        job_spec({"resource": "language: java"})


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"name": "w", "queues": [{"name": "q"}]}, "worker w: queues.0.slots: Field required"),
        ({"name": "w", "state": "sleepy"}, "worker w: state: Input should be 'active'"),
        ({"name": "w", "slots": "many"}, "worker w: slots: Input should be a valid integer"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_format_error(body: dict[str, object], words: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        worker_spec(body)
    assert str(raised.value).startswith(words)


def test_a_job_value_of_the_wrong_type_is_a_format_error() -> None:
    with pytest.raises(ScenarioError, match="job: resources: Input should be a valid string"):
        job_spec({"resources": 5})
