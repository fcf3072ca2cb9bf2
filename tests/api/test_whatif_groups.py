"""A what-if of groups of submitters (docs/ordering.md, docs/whatif.md) under
``group-share``: ``set_weights`` items with a ``group`` move submitters, as ``PUT
/v1/shares/{submitter}`` does, ``set_group_weights`` set groups' weights, as ``PUT
/v1/groups/{name}`` does; the workers of ``pull_workers`` say who would go first, nothing
is stored, and a bad item is a 422 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.support.http_api import assert_problem, submitter_token
from tests.support.table_digest import table_digest


def _ok(response: Any) -> Any:
    assert response.status_code in (200, 201), response.text
    return response.json()


def _worker(client: TestClient, admin: dict[str, str]) -> dict[str, str]:
    worker = _ok(client.post("/v1/workers", json={"name": "w", "slots": 1}, headers=admin))
    return {"Authorization": f"Bearer {worker['token']}"}


def _run_one(client: TestClient, submitter: dict[str, str], worker: dict[str, str]) -> None:
    """The submitter's job runs to its end on ``w``: its usage (and its group's) grows."""
    job = _ok(client.post("/v1/jobs", json={}, headers=submitter))["id"]
    assert _ok(client.post("/v1/workers/w/pull", headers=worker))["id"] == job
    _ok(client.post(f"/v1/jobs/{job}/finish", json={"outcome": "finished"}, headers=worker))


def _first_pull(client: TestClient, admin: dict[str, str], changes: dict[str, Any]) -> int:
    answer = _ok(client.post("/v1/whatif", json={**changes, "pull_workers": ["w"]}, headers=admin))
    (pull,) = answer["first_pulls"]
    return int(pull["job"])


def _groups(client: TestClient, admin: dict[str, str]) -> dict[str | None, dict[str, Any]]:
    listed = _ok(client.get("/v1/shares", headers=admin))["groups"]
    return {g["group"]: g for g in listed}


def test_a_group_weight_in_a_what_if_changes_who_goes_first(
    group_client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """course-a (alice) and course-b (carol) both used the farm; a weight of 1e6 for the
    group that used more would send its member's job first; applied for real, it does."""
    client, admin = group_client, admin_headers
    alice, carol = submitter_token(client, admin, "alice"), submitter_token(client, admin, "carol")
    w = _worker(client, admin)
    for name, group in (("alice", "course-a"), ("carol", "course-b")):
        _ok(client.put(f"/v1/shares/{name}", json={"weight": 1, "group": group}, headers=admin))
    for who in (alice, carol):
        _run_one(client, who, w)
    waiting = {
        "course-a": _ok(client.post("/v1/jobs", json={}, headers=alice))["id"],
        "course-b": _ok(client.post("/v1/jobs", json={}, headers=carol))["id"],
    }
    groups = _groups(client, admin)
    lighter = min(("course-a", "course-b"), key=lambda name: groups[name]["usage"])
    heavier = "course-b" if lighter == "course-a" else "course-a"
    digest = table_digest(database)

    assert _first_pull(client, admin, {}) == waiting[lighter]
    heavy = {"set_group_weights": [{"group": heavier, "weight": 1e6}]}
    assert _first_pull(client, admin, heavy) == waiting[heavier]
    assert table_digest(database) == digest
    assert {g["group"]: g["weight"] for g in _groups(client, admin).values()} == {
        "course-a": 1.0,
        "course-b": 1.0,
    }

    _ok(client.put(f"/v1/groups/{heavier}", json={"weight": 1e6}, headers=admin))
    assert _ok(client.post("/v1/workers/w/pull", headers=w))["id"] == waiting[heavier]


def test_moving_a_submitter_in_a_what_if_changes_who_goes_first(
    group_client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """alice used the farm in course-a; bob (course-a) waits behind carol (course-b, who
    used nothing). Moved to course-b, alice takes her usage along: bob's job goes first;
    applied for real, it does; a group named for the first time is made (and rolled
    back)."""
    client, admin = group_client, admin_headers
    tokens = {name: submitter_token(client, admin, name) for name in ("alice", "bob", "carol")}
    w = _worker(client, admin)
    for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
        _ok(client.put(f"/v1/shares/{name}", json={"weight": 1, "group": group}, headers=admin))
    _run_one(client, tokens["alice"], w)
    bob_job = _ok(client.post("/v1/jobs", json={}, headers=tokens["bob"]))["id"]
    carol_job = _ok(client.post("/v1/jobs", json={}, headers=tokens["carol"]))["id"]
    digest = table_digest(database)

    assert _first_pull(client, admin, {}) == carol_job
    move = {"set_weights": [{"submitter": "alice", "weight": 1, "group": "course-b"}]}
    assert _first_pull(client, admin, move) == bob_job
    # To a new group (made, then rolled back): course-a, bob's alone, used nothing, as
    # course-b: tied, bob's older job goes first.
    elsewhere = {"set_weights": [{"submitter": "alice", "weight": 1, "group": "course-c"}]}
    assert _first_pull(client, admin, elsewhere) == bob_job
    # Without `group` alice stays in course-a, as the route leaves her.
    assert _first_pull(client, admin, {"set_weights": [{"submitter": "alice", "weight": 5}]}) == (
        carol_job
    )
    assert table_digest(database) == digest
    groups = _groups(client, admin)
    assert set(groups) == {"course-a", "course-b"}
    assert groups["course-a"]["members"] == ["alice", "bob"]

    _ok(client.put("/v1/shares/alice", json={"weight": 1, "group": "course-b"}, headers=admin))
    assert _ok(client.post("/v1/workers/w/pull", headers=w))["id"] == bob_job


def test_a_null_group_in_a_what_if_takes_the_submitter_out(
    group_client: TestClient, admin_headers: dict[str, str]
) -> None:
    """alice (course-a) and carol (course-b) both used the farm; bob (course-a) and carol
    wait. ``"group": null`` makes bob a group of his own that used nothing: his job
    goes first, whichever group goes first now; nothing is stored."""
    client, admin = group_client, admin_headers
    tokens = {name: submitter_token(client, admin, name) for name in ("alice", "bob", "carol")}
    w = _worker(client, admin)
    for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
        _ok(client.put(f"/v1/shares/{name}", json={"weight": 1, "group": group}, headers=admin))
    _run_one(client, tokens["alice"], w)
    _run_one(client, tokens["carol"], w)
    bob_job = _ok(client.post("/v1/jobs", json={}, headers=tokens["bob"]))["id"]
    carol_job = _ok(client.post("/v1/jobs", json={}, headers=tokens["carol"]))["id"]
    out = {"set_weights": [{"submitter": "bob", "weight": 1, "group": None}]}
    assert _first_pull(client, admin, out) == bob_job
    groups = _groups(client, admin)
    baseline = carol_job if groups["course-b"]["usage"] < groups["course-a"]["usage"] else bob_job
    assert _first_pull(client, admin, {}) == baseline
    assert _groups(client, admin)["course-a"]["members"] == ["alice", "bob"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"set_group_weights": [{"group": "course-a", "weight": 0}]}, "set_group_weights.0.weight"),
        (
            {"set_group_weights": [{"group": "a", "weight": 1}, {"group": "b", "weight": "x"}]},
            "set_group_weights.1.weight",
        ),
        ({"set_group_weights": [{"group": "bad name", "weight": 1}]}, "set_group_weights.0.group"),
        ({"set_group_weights": [{"weight": 1}]}, "set_group_weights.0.group"),
        ({"set_group_weights": [{"group": "a", "weight": 1, "x": 1}]}, "set_group_weights.0.x"),
        (
            {"set_weights": [{"submitter": "alice", "weight": 1, "group": "bad name"}]},
            "set_weights.0.group",
        ),
        (
            {"set_weights": [{"submitter": "alice", "weight": 1, "group": ""}]},
            "set_weights.0.group",
        ),
        ({"set_weights": [{"submitter": "alice", "weight": 1, "group": 3}]}, "set_weights.0.group"),
    ],
)
def test_a_bad_group_item_is_a_422_naming_it_and_nothing_is_stored(
    group_client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    changes: dict[str, Any],
    field: str,
) -> None:
    digest = table_digest(database)
    problem = assert_problem(
        group_client.post("/v1/whatif", json=changes, headers=admin_headers), 422
    )
    assert any(e["field"] == f"body.{field}" for e in problem["errors"]), problem
    assert table_digest(database) == digest
