"""Fair share over HTTP (docs/ordering.md): the shares routes (usage against share, the
weights, 422 on a bad weight), the /metrics gauges, and explain of a waiting job saying
which jobs go before it and by which rule."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.support.http_api import submitter_token


def test_usage_shares_weights_and_explain(
    fair_client: TestClient, admin_headers: dict[str, str]
) -> None:
    client = fair_client
    alice, bob = (
        submitter_token(client, admin_headers, "alice"),
        submitter_token(client, admin_headers, "bob"),
    )
    worker = client.post("/v1/workers", json={"name": "w", "slots": 1}, headers=admin_headers)
    w = {"Authorization": f"Bearer {worker.json()['token']}"}
    flood = [client.post("/v1/jobs", json={}, headers=alice).json()["id"] for _ in range(4)]
    first = client.post("/v1/workers/w/pull", headers=w).json()
    assert first["id"] == flood[0]
    finished = client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=w
    )
    assert finished.status_code == 200, finished.text
    late = [client.post("/v1/jobs", json={}, headers=bob).json()["id"] for _ in range(2)]

    shares = client.get("/v1/shares", headers=admin_headers).json()
    assert shares["ordering"] == "fair-share,priority,age" and shares["fair_share"] is True
    by_name = {s["submitter"]: s for s in shares["submitters"]}
    assert by_name["alice"]["usage"] > 0 and by_name["bob"]["usage"] == 0
    assert by_name["bob"]["below_share"] is True and by_name["alice"]["below_share"] is False
    assert [s["submitter"] for s in shares["submitters"]] == ["bob", "alice"]
    assert by_name["alice"]["share"] == pytest.approx(0.5)

    # alice's second job waits behind bob's: explain says how many go first, and why.
    explained = client.get(f"/v1/jobs/{flood[1]}/explain", headers=admin_headers).json()
    (verdict,) = explained["workers"]
    assert verdict["answer"] == "outranked", verdict
    message = verdict["clauses"][0]["message"]
    assert f"takes job {late[0]} first" in message
    assert "2 jobs ahead of it on this worker by the ordering fair-share, priority, age" in message
    assert "2 of bob (further below bob's share)" in message

    metrics = client.get("/metrics").text
    assert 'jobmatch_submitter_share{submitter="alice"} 0.5' in metrics
    assert 'jobmatch_submitter_usage{submitter="bob"} 0.0' in metrics

    weighted = client.put("/v1/shares/bob", json={"weight": 3}, headers=admin_headers)
    assert weighted.status_code == 200, weighted.text
    assert weighted.json()["share"] == pytest.approx(0.75)
    assert client.post("/v1/workers/w/pull", headers=w).json()["id"] == late[0]


def test_the_console_queue_shows_usage_against_share(
    fair_client: TestClient, admin_headers: dict[str, str]
) -> None:
    client = fair_client
    alice = submitter_token(client, admin_headers, "alice")
    client.post("/v1/jobs", json={}, headers=alice)
    client.put("/v1/shares/bob", json={"weight": 3}, headers=admin_headers)
    signed = client.post(
        "/ui/sign-in",
        data={"token": admin_headers["Authorization"].split()[1]},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    page = client.get("/ui/queue").text
    assert '<table class="list" id="shares">' in page
    rows = re.findall(
        r'<tr data-submitter="(\w+)">\s*<td>\w+</td>'
        r'\s*<td class="num">([^<]+)</td>\s*<td class="num">([^<]+)</td>',
        page,
    )
    assert rows == [("alice", "1", "25.0%"), ("bob", "3", "75.0%")]


def test_a_what_if_of_weights_shows_who_goes_first(
    fair_client: TestClient, admin_headers: dict[str, str]
) -> None:
    """carol and dave used the same; a weight of 3 for carol would send her job first,
    and nothing is stored."""
    client = fair_client
    carol, dave = (
        submitter_token(client, admin_headers, "carol"),
        submitter_token(client, admin_headers, "dave"),
    )
    worker = client.post("/v1/workers", json={"name": "w", "slots": 1}, headers=admin_headers)
    w = {"Authorization": f"Bearer {worker.json()['token']}"}
    ran = [client.post("/v1/jobs", json={}, headers=h).json()["id"] for h in (carol, dave)]
    for job_id in ran:  # each runs one job: both have usage
        assert client.post("/v1/workers/w/pull", headers=w).json()["id"] == job_id
        client.post(f"/v1/jobs/{job_id}/finish", json={"outcome": "finished"}, headers=w)
    waiting = {
        name: client.post("/v1/jobs", json={}, headers=h).json()["id"]
        for name, h in (("carol", carol), ("dave", dave))
    }
    usage = {
        s["submitter"]: s["usage"]
        for s in client.get("/v1/shares", headers=admin_headers).json()["submitters"]
    }
    lighter = min(usage, key=lambda name: usage[name])
    heavier = "dave" if lighter == "carol" else "carol"

    def first_pull(weights: list[dict[str, object]]) -> int:
        answer = client.post(
            "/v1/whatif",
            json={"set_weights": weights, "pull_workers": ["w"]},
            headers=admin_headers,
        )
        assert answer.status_code == 200, answer.text
        (pull,) = answer.json()["first_pulls"]
        return int(pull["job"])

    assert first_pull([]) == waiting[lighter]
    assert first_pull([{"submitter": heavier, "weight": 1e6}]) == waiting[heavier]
    shares = client.get("/v1/shares", headers=admin_headers).json()["submitters"]
    assert {s["submitter"]: s["weight"] for s in shares} == {"carol": 1.0, "dave": 1.0}
    refused = client.post(
        "/v1/whatif",
        json={"set_weights": [{"submitter": "carol", "weight": 0}]},
        headers=admin_headers,
    )
    assert refused.status_code == 422 and "set_weights" in refused.text


@pytest.mark.parametrize("weight", [0, -1, "x", 1e12])
def test_a_bad_weight_is_a_422_and_nothing_is_stored(
    fair_client: TestClient, admin_headers: dict[str, str], weight: object
) -> None:
    answer = fair_client.put("/v1/shares/carol", json={"weight": weight}, headers=admin_headers)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert "weight" in answer.text
    listed = fair_client.get("/v1/shares", headers=admin_headers).json()
    assert listed["submitters"] == []


def test_the_default_policy_says_fair_share_is_off(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    shares = client.get("/v1/shares", headers=admin_headers).json()
    assert (shares["ordering"], shares["fair_share"]) == ("priority,age", False)
    assert client.get("/v1/shares").status_code == 401
    assert "jobmatch_submitter_usage" not in client.get("/metrics").text


def test_groups_weights_order_metrics_and_explain(
    group_client: TestClient, admin_headers: dict[str, str]
) -> None:
    client = group_client
    tokens = {
        name: submitter_token(client, admin_headers, name) for name in ("alice", "bob", "carol")
    }
    worker = client.post("/v1/workers", json={"name": "w", "slots": 1}, headers=admin_headers)
    w = {"Authorization": f"Bearer {worker.json()['token']}"}
    for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
        put = client.put(
            f"/v1/shares/{name}", json={"weight": 1, "group": group}, headers=admin_headers
        )
        assert put.status_code == 200, put.text
        assert put.json()["group"] == group
    # alice runs a job to its end: course-a has used the farm, course-b not.
    first = client.post("/v1/jobs", json={}, headers=tokens["alice"]).json()["id"]
    assert client.post("/v1/workers/w/pull", headers=w).json()["id"] == first
    finished = client.post(f"/v1/jobs/{first}/finish", json={"outcome": "finished"}, headers=w)
    assert finished.status_code == 200, finished.text
    bob_job = client.post("/v1/jobs", json={}, headers=tokens["bob"]).json()["id"]
    carol_job = client.post("/v1/jobs", json={}, headers=tokens["carol"]).json()["id"]

    explained = client.get(f"/v1/jobs/{bob_job}/explain", headers=admin_headers).json()
    (verdict,) = explained["workers"]
    assert verdict["answer"] == "outranked", verdict
    message = verdict["clauses"][0]["message"]
    assert "1 job ahead of it on this worker by the ordering group-share, fair-share" in message
    assert "1 of carol (group course-b further below its share)" in message

    listed = client.get("/v1/shares", headers=admin_headers).json()
    assert [s["submitter"] for s in listed["submitters"]] == ["carol", "bob", "alice"]
    groups = {g["group"]: g for g in listed["groups"]}
    assert groups["course-a"]["members"] == ["alice", "bob"]
    assert groups["course-a"]["usage"] > 0 and groups["course-b"]["usage"] == 0
    assert groups["course-b"]["below_share"] is True

    # A weight of 3 against 1: course-a's share is 75%.
    weighted = client.put("/v1/groups/course-a", json={"weight": 3}, headers=admin_headers)
    assert weighted.status_code == 200, weighted.text
    assert weighted.json()["share"] == pytest.approx(0.75)
    assert weighted.json()["members"] == ["alice", "bob"]

    metrics = client.get("/metrics").text
    assert 'jobmatch_group_share{group="course-a"} 0.75' in metrics
    assert 'jobmatch_group_usage{group="course-b"} 0.0' in metrics
    # The job ran a moment: all the usage there is, course-a's.
    assert 'jobmatch_group_usage_fraction{group="course-a"} 1.0' in metrics

    assert client.post("/v1/workers/w/pull", headers=w).json()["id"] == carol_job
    # Left out, the group stays; null takes the submitter out of it.
    kept = client.put("/v1/shares/bob", json={"weight": 2}, headers=admin_headers).json()
    assert kept["group"] == "course-a" and kept["weight"] == 2
    alone = client.put("/v1/shares/bob", json={"weight": 2, "group": None}, headers=admin_headers)
    assert alone.json()["group"] is None


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/groups/course-a", {"weight": 0}, "weight"),
        ("/v1/groups/course-a", {"weight": "much"}, "weight"),
        ("/v1/groups/course-a", {}, "weight"),
        ("/v1/groups/course-a", {"weight": 1, "members": ["x"]}, "members"),
        ("/v1/groups/bad%20name", {"weight": 1}, "name"),
        ("/v1/shares/alice", {"weight": 1, "group": "bad name"}, "group"),
        ("/v1/shares/alice", {"weight": 1, "group": ""}, "group"),
        ("/v1/shares/alice", {"weight": 1, "group": 3}, "group"),
    ],
)
def test_a_bad_group_or_weight_is_a_problem_naming_it(
    client: TestClient, admin_headers: dict[str, str], path: str, body: object, field: str
) -> None:
    answer = client.put(path, json=body, headers=admin_headers)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert field in answer.text
    assert client.get("/v1/shares", headers=admin_headers).json()["groups"] == []


def _console(client: TestClient, admin: dict[str, str]) -> str:
    signed = client.post(
        "/ui/sign-in",
        data={"token": admin["Authorization"].split()[1]},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    return client.get("/ui/queue").text


def test_the_console_queue_shows_the_groups(
    group_client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Under group-share, with groups: each submitter's group beside its share, and a
    table of the groups (a submitter without one in parentheses), furthest below its
    share first, with weight, share, usage and members."""
    client = group_client
    tokens = {
        name: submitter_token(client, admin_headers, name) for name in ("alice", "bob", "dave")
    }
    worker = client.post("/v1/workers", json={"name": "w", "slots": 1}, headers=admin_headers)
    w = {"Authorization": f"Bearer {worker.json()['token']}"}
    for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
        put = client.put(
            f"/v1/shares/{name}", json={"weight": 1, "group": group}, headers=admin_headers
        )
        assert put.status_code == 200, put.text
    client.put("/v1/groups/course-a", json={"weight": 3}, headers=admin_headers)
    # alice runs a job to its end: course-a has used the farm; dave (no group) submits.
    first = client.post("/v1/jobs", json={}, headers=tokens["alice"]).json()["id"]
    assert client.post("/v1/workers/w/pull", headers=w).json()["id"] == first
    client.post(f"/v1/jobs/{first}/finish", json={"outcome": "finished"}, headers=w)
    client.post("/v1/jobs", json={}, headers=tokens["dave"])

    page = _console(client, admin_headers)
    assert '<table class="list" id="groups">' in page
    groups = re.findall(
        r'<tr data-group="([^"]+)">\s*<td class="nowrap">[^<]+</td>'
        r'\s*<td class="members">([^<]+)</td>'
        r'\s*<td class="num">([^<]+)</td>\s*<td class="num">([^<]+)</td>'
        r'\s*<td class="num">([^<]+)</td>\s*<td class="num">([^<]+)</td>'
        r"\s*<td>(yes|no)</td>",
        page,
    )
    # dave and course-b used nothing (the lone dave first, as the API lists them),
    # course-a all there is; shares 1/5, 1/5, 3/5.
    assert [(g[0], g[1], g[2], g[3], g[6]) for g in groups] == [
        ("(dave)", "dave", "1", "20.0%", "yes"),
        ("course-b", "carol", "1", "20.0%", "yes"),
        ("course-a", "alice, bob", "3", "60.0%", "no"),
    ]
    # The job ran a moment (its usage shows as 0.0 slot-seconds): all there is.
    assert [g[5] for g in groups] == ["0.0%", "0.0%", "100.0%"]
    submitters = re.findall(
        r'<tr data-submitter="(\w+)">\s*<td>\w+</td>\s*<td class="nowrap">([^<]+)</td>', page
    )
    assert submitters == [
        ("carol", "course-b"),
        ("dave", "-"),
        ("bob", "course-a"),
        ("alice", "course-a"),
    ]
    assert "groups do not change who goes first" not in page


def test_the_console_queue_has_no_groups_table_without_groups(
    group_client: TestClient, admin_headers: dict[str, str]
) -> None:
    client = group_client
    client.put("/v1/shares/alice", json={"weight": 2}, headers=admin_headers)
    page = _console(client, admin_headers)
    assert '<table class="list" id="shares">' in page
    assert 'id="groups"' not in page and "<th>Group</th>" not in page


def test_the_console_says_groups_do_not_order_under_fair_share_alone(
    fair_client: TestClient, admin_headers: dict[str, str]
) -> None:
    client = fair_client
    client.put("/v1/shares/alice", json={"weight": 1, "group": "course-a"}, headers=admin_headers)
    page = _console(client, admin_headers)
    assert '<tr data-group="course-a">' in page
    assert "groups do not change who goes first" in page
