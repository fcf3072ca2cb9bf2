"""Issue 22: a running job's output streamed by its worker and read by offset, and the
worker's own Grid Engine load report, on both databases."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.settings import Settings
from tests.support.http_api import assert_problem, register, submit


def _running_job(client: TestClient, admin: dict[str, str]) -> tuple[int, dict[str, str]]:
    worker = register(client, admin, "w1")
    job = submit(client, admin, command=["true"])
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert pulled.json()["id"] == job["id"]
    return int(job["id"]), worker


def _append(client: TestClient, worker: dict[str, str], job: int, offset: int, text: str) -> int:
    response = client.post(
        f"/v1/workers/w1/jobs/{job}/output",
        json={"offset": offset, "text": text},
        headers=worker,
    )
    assert response.status_code == 200, response.text
    return int(response.json()["next_offset"])


def test_output_is_read_from_an_offset_while_the_job_runs(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    job, worker = _running_job(client, admin_headers)
    empty = client.get(f"/v1/jobs/{job}/output", headers=admin_headers).json()
    assert (empty["text"], empty["next_offset"]) == ("", 0)
    assert _append(client, worker, job, 0, "hello ") == 6
    assert _append(client, worker, job, 6, "world\n") == 12
    whole = client.get(f"/v1/jobs/{job}/output", headers=admin_headers).json()
    assert whole == {
        "job": job,
        "offset": 0,
        "text": "hello world\n",
        "next_offset": 12,
        "missed": 0,
    }
    rest = client.get(f"/v1/jobs/{job}/output?offset=6", headers=admin_headers).json()
    assert (rest["offset"], rest["text"], rest["next_offset"]) == (6, "world\n", 12)
    past = client.get(f"/v1/jobs/{job}/output?offset=99", headers=admin_headers).json()
    assert (past["text"], past["next_offset"]) == ("", 12)


def test_a_resent_chunk_is_stored_once(client: TestClient, admin_headers: dict[str, str]) -> None:
    job, worker = _running_job(client, admin_headers)
    _append(client, worker, job, 0, "abc")
    assert _append(client, worker, job, 0, "abc") == 3  # the reply was lost; sent again
    assert _append(client, worker, job, 1, "bcdef") == 6  # overlaps what is there
    text = client.get(f"/v1/jobs/{job}/output", headers=admin_headers).json()["text"]
    assert text == "abcdef"


def test_the_server_keeps_a_bounded_tail_with_absolute_offsets(
    settings: Settings, admin_headers: dict[str, str], database: object
) -> None:
    from app.api.app import create_app

    bounded = settings.model_copy(update={"output_tail_chars": 4})
    with TestClient(create_app(bounded, database=database), raise_server_exceptions=False) as c:  # type: ignore[arg-type]
        job, worker = _running_job(c, admin_headers)
        assert _append(c, worker, job, 0, "0123456789") == 10
        read = c.get(f"/v1/jobs/{job}/output", headers=admin_headers).json()
        assert (read["offset"], read["text"], read["next_offset"], read["missed"]) == (
            6,
            "6789",
            10,
            6,
        )
        # A gap (text the worker could not send) restarts the tail at the chunk's offset.
        assert _append(c, worker, job, 20, "xy") == 22
        after = c.get(f"/v1/jobs/{job}/output?offset=10", headers=admin_headers).json()
        assert (after["offset"], after["text"], after["missed"]) == (20, "xy", 10)


def test_only_the_running_worker_appends(client: TestClient, admin_headers: dict[str, str]) -> None:
    job, worker = _running_job(client, admin_headers)
    other = register(client, admin_headers, "w2")
    foreign = client.post(
        f"/v1/workers/w2/jobs/{job}/output", json={"offset": 0, "text": "x"}, headers=other
    )
    assert_problem(foreign, 403)
    wrong_name = client.post(
        f"/v1/workers/w2/jobs/{job}/output", json={"offset": 0, "text": "x"}, headers=worker
    )
    assert_problem(wrong_name, 403)
    bad = client.post(
        f"/v1/workers/w1/jobs/{job}/output", json={"offset": -1, "text": "x"}, headers=worker
    )
    assert_problem(bad, 422)
    finished = client.post(f"/v1/jobs/{job}/finish", json={"outcome": "finished"}, headers=worker)
    assert finished.status_code == 200, finished.text
    late = client.post(
        f"/v1/workers/w1/jobs/{job}/output", json={"offset": 0, "text": "x"}, headers=worker
    )
    assert_problem(late, 409)


def test_a_finish_sent_again_is_answered_as_the_first(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """The agent resends an outcome whose answer it lost: 200 again, not 409."""
    job, worker = _running_job(client, admin_headers)
    body = {"outcome": "failed", "reason": "exit status 3", "exit_code": 3}
    first = client.post(f"/v1/jobs/{job}/finish", json=body, headers=worker)
    again = client.post(f"/v1/jobs/{job}/finish", json=body, headers=worker)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["state"] == "failed" and again.json()["exit_code"] == 3


def test_a_worker_reports_its_load_values_and_requests_see_them(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """complex(5): mem_free is a requestable host load value with relop <=; a hard request
    mem_free=2G needs a host reporting at least 2G free."""
    worker = register(client, admin_headers, "w1")
    low = client.put(
        "/v1/workers/w1/load", json={"load_values": {"mem_free": "1G"}}, headers=worker
    )
    assert low.status_code == 200, low.text
    job = submit(client, admin_headers, hard="mem_free=2G")
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 204
    high = client.put(
        "/v1/workers/w1/load", json={"load_values": {"mem_free": "4G"}}, headers=worker
    )
    assert high.status_code == 200, high.text
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]
    other = register(client, admin_headers, "w2")
    assert_problem(client.put("/v1/workers/w1/load", json={"load_values": {}}, headers=other), 403)
