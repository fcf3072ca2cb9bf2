"""/metrics speaks Prometheus and counts what the issue asks for (issue 8)."""

from __future__ import annotations

from fastapi.testclient import TestClient


def _value(text: str, line_start: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric line starts with {line_start!r}")


def test_metrics(client: TestClient, admin_headers: dict[str, str]) -> None:
    before = client.get("/metrics").text
    hits_before = (
        _value(before, 'jobmatch_category_cache_total{result="hit"}')
        if 'result="hit"' in before
        else 0.0
    )
    worker = client.post(
        "/v1/workers", json={"name": "w", "slots": 3}, headers=admin_headers
    ).json()
    for _ in range(2):
        client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers)
    client.post("/v1/workers/w/pull", headers={"Authorization": f"Bearer {worker['token']}"})
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert _value(text, 'jobmatch_jobs{state="waiting"}') == 1
    assert _value(text, 'jobmatch_jobs{state="running"}') == 1
    # Issue 25: booked and total slots are two series (one family summed over a ``kind``
    # label added unlike things), and workers are counted by state.
    assert _value(text, "jobmatch_slots_capacity ") == 3
    assert _value(text, "jobmatch_slots_booked ") == 1
    assert _value(text, 'jobmatch_workers{state="active"}') == 1
    assert _value(text, 'jobmatch_workers{state="draining"}') == 0
    # Counters are the process's (earlier tests counted too): what this one added.
    waits_before = _value(before, "jobmatch_job_wait_seconds_count ")
    assert _value(text, "jobmatch_job_wait_seconds_count ") == waits_before + 1
    assert "jobmatch_slots{" not in text
    assert _value(text, 'jobmatch_category_cache_total{result="hit"}') == hits_before + 1
    assert 'jobmatch_dispatch_duration_seconds_count{outcome="job"}' in text
    assert (
        'jobmatch_http_request_duration_seconds_count{method="POST",route="/v1/jobs",status="201"}'
        in text
    )
