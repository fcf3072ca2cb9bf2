"""Typed errors, retries and timeouts of app.client, against a scripted transport and a
socket that never answers (the live-server tests are in test_live_server.py).

Problem documents follow RFC 9457; Retry-After follows RFC 9110 section 10.2.3; the methods
retried by default are the idempotent ones of RFC 9110 section 9.2.2.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx2
import pytest

from app.client import (
    NO_RETRIES,
    AdminClient,
    ApiError,
    Conflict,
    JobSpec,
    NotFound,
    RetryPolicy,
    ServerError,
    ServerUnreachable,
    ServiceUnavailable,
    Timeouts,
    TooManyRequests,
    Unauthorized,
    UnexpectedResponse,
    ValidationFailed,
    WorkerClient,
)
from app.client.base import USER_AGENT
from app.client.models import JobPage, JobState

FAST = RetryPolicy(attempts=4, timeout=10, wait_initial=0.01, wait_max=0.05, wait_jitter=0)

JOB = {
    "id": 7,
    "state": "waiting",
    "priority": 0,
    "slots": 1,
    "category_id": 1,
    "resources": "",
    "constraint": None,
    "constraint_syntax": None,
    "shape": None,
    "jobspec": None,
    "task": None,
    "command": None,
    "timeout": None,
    "hard": None,
    "soft": None,
    "pe": None,
    "pe_slots": None,
    "submitter": "admin",
    "worker": None,
    "failure_reason": None,
    "attempts": 0,
    "exit_code": None,
    "output": None,
    "submitted_at": "2026-01-01T00:00:00Z",
    "started_at": None,
    "ended_at": None,
}


def problem(status: int, detail: str, **extra: object) -> httpx2.Response:
    body = {"type": "about:blank", "title": "T", "status": status, "detail": detail, **extra}
    headers = {"Content-Type": "application/problem+json"}
    if "retry_after" in extra:
        headers["Retry-After"] = str(body.pop("retry_after"))
    return httpx2.Response(status, content=json.dumps(body).encode(), headers=headers)


class Script:
    """A transport that answers from a list, one answer per request, and records them."""

    def __init__(self, *answers: httpx2.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def client_for(script: Script) -> AdminClient:
    return AdminClient(
        "http://jobmatch.test", "tok", retry=FAST, transport=httpx2.MockTransport(script)
    )


def test_a_422_carries_its_errors_array() -> None:
    errors = [
        {
            "field": "body.shape",
            "message": "unexpected '{'",
            "notation": "flux-shape",
            "position": 11,
            "expected": "a resource type",
            "input": "slot=4/node{",
        }
    ]
    script = Script(problem(422, "invalid shape", errors=errors))
    with client_for(script) as client, pytest.raises(ValidationFailed) as raised:
        client.expand_shape("slot=4/node{")
    error = raised.value
    assert (error.status, error.detail) == (422, "invalid shape")
    assert error.errors[0].field == "body.shape"
    assert (error.errors[0].position, error.errors[0].notation) == (11, "flux-shape")
    assert error.errors[0].expected == "a resource type"
    assert str(error) == "422 T: invalid shape"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, Unauthorized), (404, NotFound), (409, Conflict), (500, ServerError), (418, ApiError)],
)
def test_each_status_has_its_exception_and_none_is_retried(
    status: int, expected: type[ApiError]
) -> None:
    script = Script(problem(status, "no"))
    with client_for(script) as client, pytest.raises(expected) as raised:
        client.get_job(7)
    assert raised.value.status == status
    assert len(script.requests) == 1, "only 503, 429 and transport failures are retried"


def test_an_html_error_page_is_still_a_typed_error() -> None:
    page = httpx2.Response(502, content=b"<html>Bad gateway</html>")
    with client_for(Script(page)) as client, pytest.raises(ServerError) as raised:
        client.get_job(7)
    assert raised.value.status == 502 and "Bad gateway" in raised.value.detail


def test_a_503_on_a_get_is_retried_honouring_retry_after() -> None:
    script = Script(problem(503, "busy", retry_after=0), httpx2.Response(200, json=JOB))
    with client_for(script) as client:
        assert client.get_job(7).id == 7
    assert len(script.requests) == 2


def test_a_429_is_retried_and_gives_up_after_the_attempts() -> None:
    script = Script(problem(429, "slow down", retry_after=0))
    with client_for(script) as client, pytest.raises(TooManyRequests) as raised:
        client.list_workers()
    assert raised.value.retry_after == 0
    assert len(script.requests) == FAST.attempts


def test_a_post_without_idempotency_key_is_not_retried_on_503() -> None:
    script = Script(problem(503, "busy"), httpx2.Response(200, json=JOB))
    with client_for(script) as client, pytest.raises(ServiceUnavailable):
        client.cancel_job(7)
    assert len(script.requests) == 1


def test_submit_is_retried_with_the_same_idempotency_key() -> None:
    dropped = httpx2.ReadError("connection reset")
    script = Script(dropped, problem(503, "busy"), httpx2.Response(201, json=JOB))
    with client_for(script) as client:
        assert client.submit_job(JobSpec(resources="linux")).id == 7
    keys = {request.headers["Idempotency-Key"] for request in script.requests}
    assert len(script.requests) == 3 and len(keys) == 1
    assert json.loads(script.requests[0].content) == {"resources": "linux"}


def test_a_bulk_submission_is_retried_with_the_same_idempotency_key() -> None:
    """Issue 38: POST /v1/jobs/bulk takes a key, so a bulk submission whose answer was lost
    is sent again, and the server answers with the jobs the first attempt stored."""
    dropped = httpx2.ReadError("connection reset")
    job = {"id": 7, "state": "waiting", "array_id": None, "task_id": None, "failure_reason": None}
    stored = {"count": 1, "jobs": [job]}
    script = Script(dropped, httpx2.Response(201, json=stored))
    with client_for(script) as client:
        assert client.submit_jobs([JobSpec(resources="linux")]).count == 1
    keys = {request.headers["Idempotency-Key"] for request in script.requests}
    assert len(script.requests) == 2 and len(keys) == 1
    given = Script(httpx2.Response(201, json=stored))
    with client_for(given) as client:
        client.submit_jobs([{"resources": "linux"}], idempotency_key="batch-3")
    assert given.requests[0].headers["Idempotency-Key"] == "batch-3"


def test_a_refused_connection_is_retried_even_for_a_pull() -> None:
    """The request never left: sending it again cannot run a job twice."""
    refused = httpx2.ConnectError("connection refused")
    script = Script(refused, refused, httpx2.Response(204))
    worker = WorkerClient(
        "http://jobmatch.test", "tok", "w1", retry=FAST, transport=httpx2.MockTransport(script)
    )
    with worker:
        assert worker.pull() is None
    assert len(script.requests) == 3
    assert script.requests[0].url.path == "/v1/workers/w1/pull"


def test_a_pull_whose_answer_was_lost_is_not_retried() -> None:
    """The server may have dispatched the job: a second pull would take another one."""
    script = Script(httpx2.ReadError("reset"), httpx2.Response(200, json=JOB))
    worker = WorkerClient(
        "http://jobmatch.test", "tok", "w1", retry=FAST, transport=httpx2.MockTransport(script)
    )
    with worker, pytest.raises(ServerUnreachable) as raised:
        worker.pull()
    assert raised.value.sent is True
    assert len(script.requests) == 1


def test_unknown_fields_are_ignored_and_missing_ones_are_an_unexpected_response() -> None:
    newer = httpx2.Response(200, json={**JOB, "a_field_from_the_future": [1, 2]})
    with client_for(Script(newer)) as client:
        assert client.get_job(7).state == "waiting"
    partial = {key: value for key, value in JOB.items() if key != "state"}
    missing = client_for(Script(httpx2.Response(200, json=partial)))
    with missing, pytest.raises(UnexpectedResponse, match=r"\.state"):
        missing.get_job(7)
    html = client_for(Script(httpx2.Response(200, text="<html>")))
    with html, pytest.raises(UnexpectedResponse, match="not JSON"):
        html.get_job(7)


def test_headers_token_user_agent_and_path_quoting() -> None:
    script = Script(httpx2.Response(404, json={"title": "Not Found", "status": 404}))
    with client_for(script) as client, pytest.raises(NotFound):
        client.get_worker("a/b")
    sent = script.requests[0]
    assert sent.headers["Authorization"] == "Bearer tok"
    assert sent.headers["User-Agent"] == USER_AGENT and "jobmatch-client/" in USER_AGENT
    assert sent.url.raw_path == b"/v1/workers/a%2Fb"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def test_a_read_timeout_is_a_server_unreachable_after_the_configured_time(
    silent_server: int,
) -> None:
    client = AdminClient(
        f"http://127.0.0.1:{silent_server}",
        "tok",
        timeouts=Timeouts(connect=1, read=0.3, write=1, pool=1),
        retry=NO_RETRIES,
    )
    started = time.monotonic()
    with client, pytest.raises(ServerUnreachable, match="timed out") as raised:
        client.health()
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 3, elapsed
    assert raised.value.sent is True


def test_a_long_poll_pull_sends_its_wait_and_reads_that_much_longer() -> None:
    """Issue 22: pull(wait=W) asks the server to hold the answer W seconds, so its read
    timeout grows by W; without wait the request carries no parameter."""
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(204, headers={"Jobmatch-Refresh-Metadata": "true"})

    timeouts = Timeouts(read=7.0)
    with WorkerClient(
        "http://jm.test", "t", "w1", timeouts=timeouts, transport=httpx2.MockTransport(answer)
    ) as client:
        assert client.pull(wait=2.5) is None
        assert client.refresh_requested
        assert client.pull() is None
    waited, plain = seen
    assert waited.url.params["wait"] == "3"  # whole seconds, rounded up
    assert waited.extensions["timeout"]["read"] == 10.0
    assert "wait" not in plain.url.params
    assert plain.extensions["timeout"]["read"] == 7.0


def test_a_list_sends_its_filters_and_paging_and_parses_each_item_as_its_page_says() -> None:
    """Every page class is one generic Page with its item type; the parser binds that type,
    so items become models and a bad item is reported at its path."""
    page = {"items": [JOB], "limit": 1, "offset": 0, "next_offset": 1}
    script = Script(httpx2.Response(200, json=page))
    with client_for(script) as client:
        jobs = client.list_jobs(state="waiting", limit=1)
    assert isinstance(jobs, JobPage)
    assert jobs.items[0].state is JobState.WAITING
    assert jobs.next_offset == 1
    assert dict(script.requests[0].url.params) == {"state": "waiting", "limit": "1"}
    bad = {**page, "items": [{**JOB, "state": "sleeping"}]}
    refused = client_for(Script(httpx2.Response(200, json=bad)))
    with refused, pytest.raises(UnexpectedResponse, match=r"\.items\[0\]\.state"):
        refused.list_jobs()
