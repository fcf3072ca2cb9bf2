"""Names in URL paths and sizes of what a client stores, the same on both databases
(issue 19): a 5,000-character parallel-environment name with quotes was stored on SQLite
(PostgreSQL's VARCHAR(255) refused it), and a worker or admin could store 10 MB of
metadata in 10,000 keys. Every refusal is a 422 problem naming the field and the limit,
and nothing is stored.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import ParallelEnvironment, Worker
from app.settings import Settings
from tests.support.http_api import assert_problem, register

HOSTILE_NAMES = [
    "x" * 5000,
    "a'b\"c",
    "a b",
    "-leading-dash",
    ".hidden",
    "semi;colon",
    "x" * 256,
    "ünïcode",
]


def _count(database: Database, model: type[ParallelEnvironment] | type[Worker]) -> int:
    with database.transaction(write=False) as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=lambda n: n[:12])
def test_hostile_pe_name_is_refused_and_not_stored(
    client: TestClient, admin_headers: dict[str, str], database: Database, name: str
) -> None:
    response = client.put(
        f"/v1/pes/{name}", json={"allocation_rule": "$fill_up", "slots": 4}, headers=admin_headers
    )
    assert_problem(response, 422)
    assert "name" in response.text
    assert _count(database, ParallelEnvironment) == 0


@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/v1/workers/{}"),
        ("GET", "/v1/workers/{}/metadata"),
        ("PUT", "/v1/workers/{}/metadata"),
        ("GET", "/v1/attributes/{}"),
        ("PUT", "/v1/attributes/{}"),
        ("DELETE", "/v1/attributes/{}"),
        ("PUT", "/v1/values/hosts/{}"),
        ("PUT", "/v1/values/queues/{}/h1"),
        ("PUT", "/v1/values/queues/all.q/{}"),
        ("DELETE", "/v1/pes/{}"),
        ("GET", "/v1/tasks/{}"),
    ],
)
def test_every_name_in_a_path_is_validated(
    client: TestClient, admin_headers: dict[str, str], method: str, template: str
) -> None:
    for name in ("x" * 5000, "a'b", "a b"):
        response = client.request(method, template.format(name), json={}, headers=admin_headers)
        assert_problem(response, 422)


def test_ordinary_names_still_work(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """Grid Engine names with ``_`` and ``.`` (sge_types(1) "name"), host names with
    ``:@-``, up to 255 characters."""
    for name in ("mpi", "make_smp", "openmpi.4", "p" * 255):
        response = client.put(
            f"/v1/pes/{name}",
            json={"allocation_rule": "$fill_up", "slots": 4},
            headers=admin_headers,
        )
        assert response.status_code == 200, response.text
    register(client, admin_headers, "build-worker-0001.ci.example.com")
    got = client.get("/v1/workers/build-worker-0001.ci.example.com", headers=admin_headers)
    assert got.status_code == 200
    assert client.get("/v1/attributes/h_vmem", headers=admin_headers).status_code == 200


def test_static_metadata_limits(
    client: TestClient, admin_headers: dict[str, str], settings: Settings
) -> None:
    register(client, admin_headers, "h1")
    path = "/v1/workers/h1/metadata"
    many = {f"k{i}": i for i in range(settings.metadata_max_keys + 1)}
    response = client.put(path, json={"metadata": many}, headers=admin_headers)
    assert_problem(response, 422)
    assert "metadata" in response.text and str(settings.metadata_max_keys) in response.text
    large = {"blob": "x" * (settings.metadata_max_bytes + 1)}
    response = client.put(path, json={"metadata": large}, headers=admin_headers)
    assert_problem(response, 422)
    assert str(settings.metadata_max_bytes) in response.text
    stored = client.get(path, headers=admin_headers).json()
    assert "blob" not in str(stored) and "k0" not in str(stored)
    fits = {f"k{i}": i for i in range(settings.metadata_max_keys)}
    assert client.put(path, json={"metadata": fits}, headers=admin_headers).status_code == 200


def test_dynamic_metadata_limits(
    client: TestClient, admin_headers: dict[str, str], settings: Settings
) -> None:
    """Keys count at any depth: a namespace of 10,000 keys is refused too."""
    worker = register(client, admin_headers, "h1")
    path = "/v1/workers/h1/metadata"
    nested = {"sbuild": {"version": 1, **{f"k{i}": i for i in range(10_000)}}}
    response = client.post(path, json={"metadata": nested}, headers=worker)
    assert_problem(response, 422)
    large = {"sbuild": {"version": 1, "chroots": ["x" * 1000] * 100}}
    response = client.post(path, json={"metadata": large}, headers=worker)
    assert_problem(response, 422)
    assert "sbuild" not in str(client.get(path, headers=admin_headers).json())


def test_list_sizes_are_bounded(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    jobspec = [{"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}]}] * 257
    assert_problem(client.post("/v1/jobs", json={"jobspec": jobspec}, headers=admin_headers), 422)
    values = {f"a{i}": "1" for i in range(1025)}
    response = client.put(
        "/v1/values/global", json={"complex_values": values}, headers=admin_headers
    )
    assert_problem(response, 422)
    queues = [{"name": f"q{i}", "slots": 1} for i in range(257)]
    response = client.post(
        "/v1/workers", json={"name": "h2", "queues": queues}, headers=admin_headers
    )
    assert_problem(response, 422)
    assert _count(database, Worker) == 0
