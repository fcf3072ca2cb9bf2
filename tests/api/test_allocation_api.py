"""Inventories and allocation over HTTP (issue 9): workers declare their resources as a
shape or an RFC 14 list, pulls book concrete cores and GPUs, POST /v1/jobs/{id}/allocate
books multi-node jobs, GET /v1/jobs/{id}/allocation answers R, the explanation of a job that
cannot be placed names the short level, and finish/cancel free what the job held."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import InventoryBooking, InventoryCount, InventoryVertex, Worker
from tests.support.http_api import assert_problem

NODE = "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]"
#: NODE as an RFC 14 resources list.
NODE_JSON: list[dict[str, Any]] = [
    {
        "type": "node",
        "count": 1,
        "with": [
            {
                "type": "socket",
                "count": 2,
                "with": [{"type": "core", "count": 4}, {"type": "gpu", "count": 1}],
            },
            {"type": "memory", "count": 16, "unit": "GB"},
        ],
    }
]
FULL = {"node": 1, "socket": 2, "core": 8, "gpu": 2, "memory:GB": 16}


def register(
    client: TestClient,
    admin: dict[str, str],
    name: str,
    inventory: object,
    rank: int | None = None,
) -> dict[str, str]:
    response = client.post(
        "/v1/workers",
        json={"name": name, "rank": rank, "slots": 8, "inventory": inventory},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def submit(client: TestClient, admin: dict[str, str], shape: str) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"shape": shape}, headers=admin)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def free(client: TestClient, admin: dict[str, str], name: str) -> dict[str, int]:
    body: dict[str, int] = client.get(f"/v1/workers/{name}", headers=admin).json()["free"]
    return body


def r_lite(client: TestClient, admin: dict[str, str], job_id: int) -> list[dict[str, Any]]:
    response = client.get(f"/v1/jobs/{job_id}/allocation", headers=admin)
    assert response.status_code == 200, response.text
    assert response.json()["job"] == job_id
    items: list[dict[str, Any]] = response.json()["R_lite"]
    return items


def test_inventory_as_shape_or_rfc14_gives_the_same_vertices(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "shaped", NODE)
    register(client, admin_headers, "listed", NODE_JSON)
    shaped = client.get("/v1/workers/shaped", headers=admin_headers).json()
    listed = client.get("/v1/workers/listed", headers=admin_headers).json()
    assert shaped["inventory"] == NODE and shaped["free"] == FULL
    assert listed["free"] == FULL and listed["inventory"].startswith('[{"type": "node"')
    with database.transaction(write=False) as session:
        rows = {
            name: session.execute(
                select(
                    InventoryVertex.position,
                    InventoryVertex.parent_position,
                    InventoryVertex.last_position,
                    InventoryVertex.type,
                    InventoryVertex.logical_id,
                    InventoryVertex.unit,
                    InventoryVertex.size,
                )
                .join(Worker, Worker.id == InventoryVertex.worker_id)
                .where(Worker.name == name)
                .order_by(InventoryVertex.position)
            ).all()
            for name in ("shaped", "listed")
        }
    assert rows["shaped"] == rows["listed"] and len(rows["shaped"]) == 14
    # Cores are numbered per worker in depth-first order: socket 1 holds cores 4-7.
    socket1 = [r for r in rows["shaped"] if r.type == "socket"][1]
    inside = [r.logical_id for r in rows["shaped"] if r.parent_position == socket1.position]
    assert inside == [4, 5, 6, 7, 1]  # cores 4-7, then gpu 1
    # Re-registering with another inventory (replace=true) replaces it; with none, it is
    # dropped.
    register_again = client.post(
        "/v1/workers?replace=true",
        json={"name": "shaped", "slots": 8, "inventory": "node/core=2"},
        headers=admin_headers,
    )
    assert register_again.status_code == 200, register_again.text
    assert register_again.json()["free"] == {"node": 1, "core": 2}
    dropped = client.post(
        "/v1/workers?replace=true", json={"name": "shaped", "slots": 8}, headers=admin_headers
    )
    assert dropped.json()["inventory"] is None and dropped.json()["free"] == {}


@pytest.mark.parametrize(
    ("inventory", "message"),
    [
        ("node/core=1-4", "not an integer"),
        ("node=2/core=4", "node count 2"),
        ("node/slot/core=4", "'slot' inside a node"),
        ("node/socket=2/[core=4", None),
        ([{"type": "node", "count": 1, "with": [{"type": "core", "count": {"min": 2}}]}], "2+"),
        (
            [{"type": "memory", "count": 4, "unit": "GB", "with": [{"type": "core", "count": 1}]}],
            "pool",
        ),
        ([{"type": "node", "count": 1, "with": [{"type": "core"}]}], "no 'count'"),
        ([{"type": "node", "count": 1}, {"type": "node", "count": 1}], "several nodes"),
    ],
)
def test_bad_inventory_is_a_422_naming_the_field_and_stores_nothing(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    inventory: object,
    message: str | None,
) -> None:
    body = assert_problem(
        client.post(
            "/v1/workers", json={"name": "w", "inventory": inventory}, headers=admin_headers
        ),
        422,
    )
    assert body["errors"][0]["field"] == "body.inventory", body
    if message is not None:
        assert message in body["errors"][0]["message"], body
    assert_problem(client.get("/v1/workers/w", headers=admin_headers), 404)
    # An existing worker keeps its inventory when a replacement brings a bad one.
    register(client, admin_headers, "kept", NODE)
    assert_problem(
        client.post(
            "/v1/workers?replace=true",
            json={"name": "kept", "inventory": inventory},
            headers=admin_headers,
        ),
        422,
    )
    kept = client.get("/v1/workers/kept", headers=admin_headers).json()
    assert kept["inventory"] == NODE and kept["free"] == FULL
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(InventoryVertex)) == 14
        assert session.scalar(select(func.count()).select_from(Worker)) == 1


def test_inventory_that_is_not_a_shape_or_list_is_a_422(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    body = assert_problem(
        client.post(
            "/v1/workers", json={"name": "w", "inventory": {"node": 1}}, headers=admin_headers
        ),
        422,
    )
    assert any(e["field"].startswith("body.inventory") for e in body["errors"]), body


def test_pull_books_concrete_cores_and_gpus_and_finish_and_cancel_free_them(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    n0 = register(client, admin_headers, "n0", NODE, rank=0)
    jobs = [submit(client, admin_headers, "slot/[core=2;gpu=1]") for _ in range(3)]
    first = client.post("/v1/workers/n0/pull", headers=n0)
    assert first.status_code == 200 and first.json()["id"] == jobs[0]["id"]
    assert r_lite(client, admin_headers, jobs[0]["id"]) == [
        {"rank": 0, "node": "n0", "children": {"core": "0-1", "gpu": "0"}}
    ]
    second = client.post("/v1/workers/n0/pull", headers=n0)
    assert second.json()["id"] == jobs[1]["id"]
    assert r_lite(client, admin_headers, jobs[1]["id"]) == [
        {"rank": 0, "node": "n0", "children": {"core": "2-3", "gpu": "1"}}
    ]
    assert free(client, admin_headers, "n0") == {**FULL, "core": 4, "gpu": 0}
    # Both GPUs are held: the third job waits although slots and cores are free.
    assert client.post("/v1/workers/n0/pull", headers=n0).status_code == 204
    assert client.get(f"/v1/jobs/{jobs[2]['id']}", headers=admin_headers).json()["state"] == (
        "waiting"
    )

    done = client.post(f"/v1/jobs/{jobs[0]['id']}/finish", json={"outcome": "finished"}, headers=n0)
    assert done.json()["state"] == "finished"
    assert r_lite(client, admin_headers, jobs[0]["id"]) == []
    assert free(client, admin_headers, "n0") == {**FULL, "core": 6, "gpu": 1}
    third = client.post("/v1/workers/n0/pull", headers=n0)
    assert third.json()["id"] == jobs[2]["id"]
    # The freed vertices are taken again, lowest ids first.
    assert r_lite(client, admin_headers, jobs[2]["id"])[0]["children"] == {
        "core": "0-1",
        "gpu": "0",
    }

    cancelled = client.post(f"/v1/jobs/{jobs[1]['id']}/cancel", headers=admin_headers)
    assert cancelled.json()["state"] == "cancelled"
    failed = client.post(
        f"/v1/jobs/{jobs[2]['id']}/finish",
        json={"outcome": "failed", "reason": "oom"},
        headers=n0,
    )
    assert failed.json()["state"] == "failed"
    assert free(client, admin_headers, "n0") == FULL
    with database.transaction(write=False) as session:
        assert (
            session.scalar(select(func.count()).where(InventoryBooking.released_at.is_(None))) == 0
        )
        assert session.scalar(select(func.count()).where(InventoryVertex.held_by.is_not(None))) == 0
        # One exclusive booking per core and GPU taken: three jobs of three vertices.
        assert session.scalar(select(func.count()).select_from(InventoryBooking)) == 9


def test_allocate_books_a_multi_node_job(client: TestClient, admin_headers: dict[str, str]) -> None:
    tokens = [register(client, admin_headers, f"n{i}", NODE, rank=i) for i in range(3)]
    job = submit(client, admin_headers, "node=2/slot/[core=3;gpu=1;memory=4{unit:GB}]")
    assert job["state"] == "waiting"
    # No single pull can place two nodes: pulls leave it waiting.
    assert client.post("/v1/workers/n0/pull", headers=tokens[0]).status_code == 204
    submitter = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    ).json()["token"]
    assert_problem(
        client.post(
            f"/v1/jobs/{job['id']}/allocate", headers={"Authorization": f"Bearer {submitter}"}
        ),
        403,
    )
    started = client.post(f"/v1/jobs/{job['id']}/allocate", headers=admin_headers)
    assert started.status_code == 200, started.text
    assert started.json()["state"] == "running" and started.json()["worker"] == "n0"
    expected = {"children": {"core": "0-2", "gpu": "0"}, "pools": {"memory": {"GB": 4}}}
    assert r_lite(client, admin_headers, job["id"]) == [
        {"rank": 0, "node": "n0", **expected},
        {"rank": 1, "node": "n1", **expected},
    ]
    assert free(client, admin_headers, "n1") == {**FULL, "core": 5, "gpu": 1, "memory:GB": 12}
    assert free(client, admin_headers, "n2") == FULL
    assert_problem(client.post(f"/v1/jobs/{job['id']}/allocate", headers=admin_headers), 409)
    assert_problem(client.post("/v1/jobs/999999/allocate", headers=admin_headers), 404)
    # The first node reports the end; every node's vertices are freed.
    done = client.post(
        f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=tokens[0]
    )
    assert done.json()["state"] == "finished"
    assert [free(client, admin_headers, f"n{i}") for i in range(3)] == [FULL] * 3


def test_cancel_of_a_multi_node_job_frees_every_node(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    for i in range(2):
        register(client, admin_headers, f"n{i}", NODE, rank=i)
    job = submit(client, admin_headers, "slot=2/node")
    assert client.post(f"/v1/jobs/{job['id']}/allocate", headers=admin_headers).status_code == 200
    # Whole nodes inside a slot are exclusive (RFC 14): nothing is left on either.
    assert free(client, admin_headers, "n1") == {
        "node": 0,
        "socket": 0,
        "core": 0,
        "gpu": 0,
        "memory:GB": 0,
    }
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel", headers=admin_headers)
    assert cancelled.json()["state"] == "cancelled"
    assert [free(client, admin_headers, f"n{i}") for i in range(2)] == [FULL, FULL]
    assert r_lite(client, admin_headers, job["id"]) == []


def test_explanation_names_the_short_level_and_the_workers(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    for i in range(2):
        register(client, admin_headers, f"n{i}", NODE, rank=i)
    # Eight cores per node, but only four per socket.
    job = submit(client, admin_headers, "node/socket/core=6")
    assert job["state"] == "waiting"
    explanation = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    allocation = explanation["allocation"]
    assert allocation["placeable"] is False and allocation["candidate_workers"] == 2
    short = {s["path"]: s for s in allocation["shortfalls"]}
    assert short["node/socket/core"] == {
        "path": "node/socket/core",
        "needed": 6,
        "found": 4,
        "places": 4,
        "workers": ["n0", "n1"],
    }
    assert_problem(client.post(f"/v1/jobs/{job['id']}/allocate", headers=admin_headers), 409)

    # Three whole nodes asked, two exist: the slot level finds two.
    three = submit(client, admin_headers, "slot=3/node")
    allocation = client.get(f"/v1/jobs/{three['id']}/explain", headers=admin_headers).json()[
        "allocation"
    ]
    # The level lies across nodes: it names every worker it considered (issue 21: it
    # listed none).
    assert allocation["shortfalls"] == [
        {"path": "slot/node", "needed": 3, "found": 2, "places": 1, "workers": ["n0", "n1"]}
    ]

    # A placeable job says so, with no shortfall; a job without a shape has no section.
    fine = submit(client, admin_headers, "node/socket/core=4")
    allocation = client.get(f"/v1/jobs/{fine['id']}/explain", headers=admin_headers).json()[
        "allocation"
    ]
    assert allocation == {
        "placeable": True,
        "candidate_workers": 2,
        "shortfalls": [],
        "note": None,
    }
    plain = client.post("/v1/jobs", json={}, headers=admin_headers).json()
    assert (
        client.get(f"/v1/jobs/{plain['id']}/explain", headers=admin_headers).json()["allocation"]
        is None
    )


def test_busy_nodes_leave_the_candidate_filter(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """Workers whose free counts cannot hold a node's needs are filtered out in SQL; the
    explanation counts only the survivors."""
    tokens = [register(client, admin_headers, f"n{i}", NODE, rank=i) for i in range(2)]
    hog = submit(client, admin_headers, "slot/core=7")
    assert client.post("/v1/workers/n0/pull", headers=tokens[0]).json()["id"] == hog["id"]
    job = submit(client, admin_headers, "slot=2/node/core=2")
    allocation = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()[
        "allocation"
    ]
    assert allocation["placeable"] is False and allocation["candidate_workers"] == 1
    with database.transaction(write=False) as session:
        counts = dict(
            session.execute(
                select(Worker.name, InventoryCount.free)
                .join(Worker, Worker.id == InventoryCount.worker_id)
                .where(InventoryCount.type == "core")
            ).all()
        )
    assert counts == {"n0": 1, "n1": 8}


def test_job_larger_than_any_inventory_fails_at_submission(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Misfit reason inventory-too-small: per-node needs above everything a worker's
    inventory holds (not only what is free now) rule the worker out for good."""
    tokens = register(client, admin_headers, "small", NODE, rank=0)
    for shape in ("slot/core=12", "node/[core=2;memory=32{unit:GB}]", "slot=2/node/gpu=3"):
        job = submit(client, admin_headers, shape)
        assert job["state"] == "failed", shape
        assert job["failure_reason"] == "No suitable worker found"
    # What is merely busy now still waits: the totals decide, not the free counts.
    hog = submit(client, admin_headers, "slot/core=8")
    assert client.post("/v1/workers/small/pull", headers=tokens).json()["id"] == hog["id"]
    six = submit(client, admin_headers, "slot/core=6")
    assert six["state"] == "waiting"

    # A worker without an inventory offers node/[core=<slots>] and nothing else (issue 35,
    # replacing the old rule that jobspecs never ruled it out): 12 cores exceed its 2 slots.
    client.post("/v1/workers", json={"name": "plain", "slots": 2}, headers=admin_headers)
    big = submit(client, admin_headers, "slot/core=12")
    assert big["state"] == "failed" and big["failure_reason"] == "No suitable worker found"
    workers = {
        w["worker"]: w
        for w in client.get(f"/v1/jobs/{big['id']}/explain", headers=admin_headers).json()[
            "workers"
        ]
    }
    assert workers["plain"]["eligible"] is False
    assert workers["plain"]["misfit_reason"] == "inventory-too-small"
    assert "node/[core=2]" in workers["plain"]["clauses"][0]["message"]
    # One with 16 slots offers node/[core=16]: twelve cores fit, so the job waits, and
    # that worker is its one candidate (small's inventory has 8 cores in all).
    client.post("/v1/workers", json={"name": "roomy", "slots": 16}, headers=admin_headers)
    big = submit(client, admin_headers, "slot/core=12")
    assert big["state"] == "waiting"
    workers = {
        w["worker"]: w
        for w in client.get(f"/v1/jobs/{big['id']}/explain", headers=admin_headers).json()[
            "workers"
        ]
    }
    assert workers["roomy"]["eligible"] is True and workers["roomy"]["misfit_reason"] is None
    assert workers["small"]["eligible"] is False
    assert workers["small"]["misfit_reason"] == "inventory-too-small"
    assert [c["reason"] for c in workers["small"]["clauses"]] == ["inventory-too-small"]
    assert "needs 12 core on one node" in workers["small"]["clauses"][0]["message"]
    assert "has 8 in all" in workers["small"]["clauses"][0]["message"]
    candidates = client.get(f"/v1/jobs/{big['id']}/candidates", headers=admin_headers).json()
    assert [c["worker"] for c in candidates["items"]] == ["roomy"]

    # A larger inventory lifts the misfit (the worker's generation changes).
    finished = client.post(
        f"/v1/jobs/{hog['id']}/finish", json={"outcome": "finished"}, headers=tokens
    )
    assert finished.status_code == 200
    bigger = client.post(
        "/v1/workers?replace=true",
        json={"name": "small", "rank": 0, "slots": 8, "inventory": "node/core=16"},
        headers=admin_headers,
    )
    assert bigger.status_code == 200, bigger.text
    explained = client.get(
        f"/v1/jobs/{big['id']}/explain", params={"worker": "small"}, headers=admin_headers
    ).json()["workers"][0]
    assert explained["eligible"] is True and explained["misfit_reason"] is None
    # Six cores, then twelve: 18 > 16, so the second waits for the first to end.
    assert client.post("/v1/workers/small/pull", headers=tokens).json()["id"] == six["id"]
    assert client.post("/v1/workers/small/pull", headers=tokens).status_code == 204
    client.post(f"/v1/jobs/{six['id']}/finish", json={"outcome": "finished"}, headers=tokens)
    assert client.post("/v1/workers/small/pull", headers=tokens).json()["id"] == big["id"]


def test_allocate_keeps_an_arrays_task_concurrency(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """qsub -tc (qsub(1) of Grid Engine 6.2u5: "allow users to limit concurrent array job
    task execution") holds for the scheduler-side allocation as for a pull: with one task
    of a -tc 1 array running, allocating the next is a 409, and explain says no; when the
    first ends, the next is allocated."""
    for i in range(4):
        register(client, admin_headers, f"n{i}", NODE, rank=i)
    shape = "node=2/slot/[core=3;gpu=1;memory=4{unit:GB}]"
    answer = client.post(
        "/v1/jobs/bulk",
        json={"jobs": [{"shape": shape, "tasks": "1-2", "task_concurrency": 1}]},
        headers=admin_headers,
    )
    assert answer.status_code == 201, answer.text
    first, second = (job["id"] for job in answer.json()["jobs"])
    started = client.post(f"/v1/jobs/{first}/allocate", headers=admin_headers)
    assert started.status_code == 200, started.text
    refused = client.post(f"/v1/jobs/{second}/allocate", headers=admin_headers)
    assert_problem(refused, 409)
    assert "task_concurrency" in refused.json()["detail"]
    explained = client.get(f"/v1/jobs/{second}/explain", headers=admin_headers).json()
    assert explained["summary"]["can_run_now"] == 0
    assert not any(worker["can_run_now"] for worker in explained["workers"])
    # Nothing of the refused allocation was booked: two nodes hold the first task only.
    assert sum(free(client, admin_headers, f"n{i}") == FULL for i in range(4)) == 2
    leader = started.json()["worker"]
    token = client.post(
        "/v1/tokens", json={"role": "worker", "subject": leader}, headers=admin_headers
    )
    assert token.status_code == 201, token.text
    done = client.post(
        f"/v1/jobs/{first}/finish",
        json={"outcome": "finished"},
        headers={"Authorization": f"Bearer {token.json()['token']}"},
    )
    assert done.status_code == 200, done.text
    again = client.post(f"/v1/jobs/{second}/allocate", headers=admin_headers)
    assert again.status_code == 200, again.text
    assert again.json()["state"] == "running"
