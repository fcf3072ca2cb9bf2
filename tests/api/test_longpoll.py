"""Long-poll dispatch (issue 22): ``POST /v1/workers/{name}/pull?wait=SECONDS``.

Through FastAPI's TestClient on both databases: on SQLite the wake-ups are the in-process
announcements of the app's Database, on PostgreSQL they travel through NOTIFY and the
app's LISTEN connection. Deadlines are a few seconds; no assertion is tighter than a
second. tests/api/test_longpoll_live.py covers real servers (two processes, timeouts,
shutdown).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from app.api.app import create_app
from app.db.engine import Database
from app.db.models import Worker
from app.matching.wakeups import WakeupHub
from app.settings import Settings
from tests.support.http_api import assert_problem, register, submit

pytestmark = pytest.mark.db

JAVA = "language: java"


@dataclass
class PendingPull:
    """A pull running in a thread of its own: its answer and how long it took."""

    thread: threading.Thread
    started: float
    answer: list[httpx2.Response] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)

    def result(self, timeout: float = 30.0) -> tuple[httpx2.Response, float]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pull did not answer"
        return self.answer[0], self.ended[0] - self.started


def pull_in_thread(
    client: TestClient, name: str, headers: dict[str, str], wait: float
) -> PendingPull:
    pending: PendingPull

    def run() -> None:
        response = client.post(f"/v1/workers/{name}/pull", params={"wait": wait}, headers=headers)
        pending.ended.append(time.monotonic())
        pending.answer.append(response)

    pending = PendingPull(threading.Thread(target=run, daemon=True), time.monotonic())
    pending.thread.start()
    return pending


def hub_of(client: TestClient) -> WakeupHub:
    hub: WakeupHub = client.app.state.longpoll.hub  # type: ignore[attr-defined]
    return hub


def worker_id(database: Database, name: str) -> int:
    with database.transaction(write=False) as session:
        found = session.scalar(select(Worker.id).where(Worker.name == name))
    assert found is not None
    return found


def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def asleep(client: TestClient, database: Database, name: str) -> None:
    """Wait until the worker's pull made its first attempt and sleeps."""
    wid = worker_id(database, name)
    until(lambda: hub_of(client).waiting_for(wid) == 1, f"{name}'s pull to wait")


def waiting_pull(
    client: TestClient, database: Database, name: str, headers: dict[str, str], wait: float
) -> PendingPull:
    """A pull of the worker, once it waits."""
    pending = pull_in_thread(client, name, headers, wait)
    asleep(client, database, name)
    return pending


#: The deadline of a pull that a wake-up should end: long, so that a wake-up is told from
#: the deadline by a wide margin even on a loaded machine (a CI run once saw a wake-up
#: answered 7 s late, past a 5 s bound, while the suite's heap was large).
WOKEN_DEADLINE = 40.0


def assert_took(pending: PendingPull, job: dict[str, Any], since: float) -> None:
    """The pull answered with the job, woken: in under half of its deadline."""
    response, _took = pending.result(timeout=WOKEN_DEADLINE + 20)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == job["id"]
    assert pending.ended[0] - since < WOKEN_DEADLINE / 2


@pytest.mark.parametrize("wait", ["-1", "60.5", "nan", "inf", "soon"])
def test_a_wait_outside_zero_to_sixty_seconds_is_refused(
    client: TestClient, admin_headers: dict[str, str], wait: str
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    submit(client, admin_headers, JAVA)
    response = client.post("/v1/workers/w1/pull", params={"wait": wait}, headers=worker)
    body = assert_problem(response, 422)
    assert "wait" in str(body)
    # Nothing was dispatched: the job still waits.
    assert client.get("/v1/jobs", params={"state": "waiting"}, headers=admin_headers).json()[
        "items"
    ]


def test_without_wait_an_empty_pull_answers_at_once(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    started = time.monotonic()
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 204
    assert time.monotonic() - started < 5


def test_a_waiting_pull_returns_soon_after_a_matching_submission(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    pending = waiting_pull(client, database, "w1", worker, wait=WOKEN_DEADLINE)
    submitted_at = time.monotonic()
    job = submit(client, admin_headers, JAVA)
    assert_took(pending, job, since=submitted_at)


def test_a_submission_the_worker_cannot_run_does_not_wake_it_into_a_dispatch(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    python = register(client, admin_headers, "python-only", "language: ?python")
    register(client, admin_headers, "java-box", "language: ?java")
    pending = waiting_pull(client, database, "python-only", python, wait=2)
    woken_before = hub_of(client).counts.wakeups
    job = submit(client, admin_headers, JAVA)
    assert job["state"] == "waiting"
    response, took = pending.result()
    assert response.status_code == 204
    assert took >= 1.5  # it slept to its deadline
    assert hub_of(client).counts.wakeups == woken_before  # not even woken
    after = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert after["state"] == "waiting"


def test_a_woken_waiter_that_loses_the_race_waits_again_until_its_deadline(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    first = register(client, admin_headers, "w1", "language: ?java")
    second = register(client, admin_headers, "w2", "language: ?java")
    pulls = [pull_in_thread(client, "w1", first, 3), pull_in_thread(client, "w2", second, 3)]
    asleep(client, database, "w1")
    asleep(client, database, "w2")
    submitted_at = time.monotonic()
    job = submit(client, admin_headers, JAVA)
    answers = [pending.result() for pending in pulls]
    winners = [
        (r, pending) for (r, _), pending in zip(answers, pulls, strict=True) if r.status_code == 200
    ]
    losers = [(r, took) for r, took in answers if r.status_code == 204]
    assert len(winners) == 1 and len(losers) == 1
    assert winners[0][0].json()["id"] == job["id"]
    assert winners[0][1].ended[0] - submitted_at < 2.5
    # The loser was woken too (both fit) and went back to sleep: it answered at its deadline.
    assert losers[0][1] >= 2.5


def test_a_finish_that_frees_the_workers_only_slot_wakes_it(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java", slots=1)
    running = submit(client, admin_headers, JAVA)
    assert client.post("/v1/workers/w1/pull", headers=worker).json()["id"] == running["id"]
    queued = submit(client, admin_headers, JAVA)
    # A worker with no free slot waits for news about itself only.
    pending = waiting_pull(client, database, "w1", worker, wait=WOKEN_DEADLINE)
    finished_at = time.monotonic()
    done = client.post(
        f"/v1/jobs/{running['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert done.status_code == 200, done.text
    assert_took(pending, queued, since=finished_at)


def test_a_change_of_the_worker_wakes_it(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    register(client, admin_headers, "w2", "language: ?java; python: ?3")
    job = submit(client, admin_headers, "language: java; python: 3")
    pending = waiting_pull(client, database, "w1", worker, wait=WOKEN_DEADLINE)
    changed_at = time.monotonic()
    update = client.post(
        "/v1/workers?replace=true",
        json={"name": "w1", "resources": "language: ?java; python: ?3", "slots": 1},
        headers=admin_headers,
    )
    assert update.status_code == 200, update.text
    assert_took(pending, job, since=changed_at)


def test_a_waiting_pull_sends_no_statement(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    pending = waiting_pull(client, database, "w1", worker, wait=3)
    event.listen(database.engine, "before_cursor_execute", count)
    try:
        time.sleep(1.5)
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
    assert statements == []
    response, _took = pending.result()
    assert response.status_code == 204


def _pull_statements(sent: list[str]) -> list[str]:
    """The statements an attempt of a pull sends first: the worker's row stamped and
    locked (app/matching/dispatch/puller.py lock_puller)."""
    return [text for text in sent if re.search(r"UPDATE workers SET last_seen", text)]


def _heard_waiting(hub: WakeupHub, job: dict[str, Any]) -> bool:
    """Whether the hub heard that the job waits (its ``c<category>.<job>``)."""
    openings = hub._openings.get(job["category_id"])
    return openings is not None and job["id"] in openings.jobs


def test_a_renewed_wait_sends_no_statement_until_news_concerns_its_worker(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """Issue 37: a farm's idle workers renew their waits all the time, and each renewal's
    attempt found what the last had found. A renewal after which nothing was announced
    that concerns its worker stands on the last attempt (no statement), and still wakes
    for a job; after a submission it could run, the renewal looks and takes it at once."""
    worker = register(client, admin_headers, "w1", "language: ?java")
    hub = hub_of(client)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    first = client.post("/v1/workers/w1/pull", params={"wait": 0.3}, headers=worker)
    assert first.status_code == 204  # its attempt found nothing; its deadline passed
    quiet_before = hub.counts.quiet_renewals
    event.listen(database.engine, "before_cursor_execute", count)
    try:
        renewed = waiting_pull(client, database, "w1", worker, WOKEN_DEADLINE)
        time.sleep(0.3)
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
    assert _pull_statements(statements) == []
    assert hub.counts.quiet_renewals == quiet_before + 1
    since = time.monotonic()
    ran = submit(client, admin_headers, JAVA)
    assert_took(renewed, ran, since)

    # The worker ran it and finished: its room changed, so its next pull looks.
    finished = client.post(
        f"/v1/jobs/{ran['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text
    after = client.post("/v1/workers/w1/pull", params={"wait": 0.3}, headers=worker)
    assert after.status_code == 204
    quiet_before = hub.counts.quiet_renewals
    job = submit(client, admin_headers, JAVA)  # between two pulls
    # On PostgreSQL the hub hears it through LISTEN, a moment after the commit; a pull
    # in that moment stands on the last attempt, and the announcement wakes it then.
    until(lambda: _heard_waiting(hub, job), "the submission's announcement")
    started = time.monotonic()
    answer = client.post("/v1/workers/w1/pull", params={"wait": WOKEN_DEADLINE}, headers=worker)
    assert answer.status_code == 200 and answer.json()["id"] == job["id"]
    assert time.monotonic() - started < WOKEN_DEADLINE / 2
    assert hub.counts.quiet_renewals == quiet_before


def test_a_worker_registered_again_under_its_name_is_heard_at_once(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """The hub remembers a name's worker id and last empty attempt. After the worker is
    deleted and registered again (a new id), its next pull must not stand on the old
    worker's attempt, waiting under the old id: a job it fits wakes it at once."""
    old = register(client, admin_headers, "w1", "language: ?java")
    assert client.post("/v1/workers/w1/pull", params={"wait": 0.3}, headers=old).status_code == 204
    assert client.delete("/v1/workers/w1", headers=admin_headers).status_code in (200, 204)
    new = register(client, admin_headers, "w1", "language: ?java")
    waiting = waiting_pull(client, database, "w1", new, WOKEN_DEADLINE)
    since = time.monotonic()
    assert_took(waiting, submit(client, admin_headers, JAVA), since)


def test_a_finished_task_wakes_another_worker_for_the_task_its_array_held_back(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """An array with ``-tc 1`` runs one task at a time: when worker a finishes task 1,
    task 2 may run on worker b, which waits. The finish announces the array's category,
    not only a's room, so b's waiting pull takes it at once."""
    a = register(client, admin_headers, "a", "language: ?java")
    b = register(client, admin_headers, "b", "language: ?java")
    stored = client.post(
        "/v1/jobs/bulk",
        json={"jobs": [{"resources": JAVA, "tasks": "1-2", "task_concurrency": 1}]},
        headers=admin_headers,
    )
    assert stored.status_code == 201, stored.text
    first, second = (job["id"] for job in stored.json()["jobs"])
    taken = client.post("/v1/workers/a/pull", headers=a)
    assert taken.status_code == 200 and taken.json()["id"] == first
    held = waiting_pull(client, database, "b", b, WOKEN_DEADLINE)  # task 2 is held back
    since = time.monotonic()
    finished = client.post(f"/v1/jobs/{first}/finish", json={"outcome": "finished"}, headers=a)
    assert finished.status_code == 200, finished.text
    assert_took(held, {"id": second}, since)


def test_closing_the_hub_releases_waiting_pulls(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    pending = waiting_pull(client, database, "w1", worker, wait=30)
    hub_of(client).close()
    response, took = pending.result()
    assert response.status_code == 204
    assert took < 10
    # Once closed (the server is shutting down), a pull no longer waits.
    started = time.monotonic()
    again = client.post("/v1/workers/w1/pull", params={"wait": 30}, headers=worker)
    assert again.status_code == 204
    assert time.monotonic() - started < 10


def test_a_category_costs_one_fit_question_then_none(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "java-box", "language: ?java")
    python = register(client, admin_headers, "python-only", "language: ?python")
    pending = waiting_pull(client, database, "python-only", python, wait=2)
    hub = hub_of(client)
    before = hub.counts.fit_checks
    for _ in range(3):
        submit(client, admin_headers, JAVA)
    until(lambda: hub.counts.announcements >= 3, "the announcements")
    assert hub.counts.fit_checks - before == 1  # the answer is kept for the category
    assert pending.result()[0].status_code == 204


def test_a_metadata_refresh_falling_due_ends_the_wait_with_the_header(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    """debusine issue #8 asks the worker to report its metadata when it is older than
    JOBMATCH_METADATA_REFRESH_SECONDS; a long-poll must not sit on that request until its
    deadline. Here the refresh falls due 1 s into a 20 s wait."""
    quick = settings.model_copy(update={"metadata_refresh_seconds": 1})
    app = create_app(quick, database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        worker = register(client, admin_headers, "w1", "language: ?java")
        reported = client.post(
            "/v1/workers/w1/metadata", json={"metadata": {"system": {}}}, headers=worker
        )
        assert reported.status_code == 200, reported.text
        pending = pull_in_thread(client, "w1", worker, wait=20)
        response, took = pending.result()
        assert response.status_code == 204
        assert response.headers.get("Jobmatch-Refresh-Metadata") == "true"
        assert took < 10


def test_a_refresh_already_due_does_not_cut_the_wait_short(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """A worker that never reported is due from the start: its pull still waits (and a
    matching submission still wakes it), the header riding on the answer."""
    worker = register(client, admin_headers, "w1", "language: ?java")
    pending = waiting_pull(client, database, "w1", worker, wait=WOKEN_DEADLINE)
    submitted_at = time.monotonic()
    job = submit(client, admin_headers, JAVA)
    assert_took(pending, job, since=submitted_at)
    assert pending.answer[0].headers.get("Jobmatch-Refresh-Metadata") == "true"


SUPERSEDED = "Jobmatch-Superseded"


def waiting_refusals(client: TestClient) -> float:
    """jobmatch_overload_refusals_total{budget="waiting_pulls"} as /metrics shows it."""
    found = re.search(
        r'^jobmatch_overload_refusals_total\{budget="waiting_pulls"\} (\S+)$',
        client.get("/metrics").text,
        re.MULTILINE,
    )
    return float(found[1]) if found else 0.0


def test_a_newer_pull_supersedes_the_oldest_which_answers_at_once(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """Issue 37: a worker holds as many waiting pulls as it has free slots, at least one;
    a newer pull takes the oldest's place, and the oldest answers 204 at once, saying so."""
    worker = register(client, admin_headers, "w1", "language: ?java")
    oldest = waiting_pull(client, database, "w1", worker, WOKEN_DEADLINE)
    newer = pull_in_thread(client, "w1", worker, WOKEN_DEADLINE)
    response, took = oldest.result(timeout=WOKEN_DEADLINE)
    assert response.status_code == 204, response.text
    assert response.headers[SUPERSEDED] == "true"
    assert took < WOKEN_DEADLINE / 2
    # The newer pull waits on, and a job reaches it.
    until(lambda: hub_of(client).waiting_for(worker_id(database, "w1")) == 1, "the newer pull")
    since = time.monotonic()
    assert_took(newer, submit(client, admin_headers, JAVA), since)
    assert SUPERSEDED not in newer.result()[0].headers


def test_a_worker_with_two_free_slots_holds_two_waiting_pulls(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w2", "language: ?java", slots=2)
    wid = worker_id(database, "w2")
    first = pull_in_thread(client, "w2", worker, WOKEN_DEADLINE)
    until(lambda: hub_of(client).waiting_for(wid) == 1, "the first pull")
    second = pull_in_thread(client, "w2", worker, WOKEN_DEADLINE)
    until(lambda: hub_of(client).waiting_for(wid) == 2, "the second pull")
    assert first.thread.is_alive() and second.thread.is_alive()
    third = pull_in_thread(client, "w2", worker, WOKEN_DEADLINE)
    response, _ = first.result(timeout=WOKEN_DEADLINE)
    assert response.status_code == 204 and response.headers[SUPERSEDED] == "true"
    until(lambda: hub_of(client).waiting_for(wid) == 2, "the third pull")
    assert second.thread.is_alive()
    jobs = [submit(client, admin_headers, JAVA) for _ in range(2)]
    answers = [p.result(timeout=WOKEN_DEADLINE + 20)[0] for p in (second, third)]
    # A wait that ran out would answer 204: a 200 with the job is the wake-up's (no time
    # bound: a loaded machine once took longer than one, and timing gates no test).
    assert [answer.status_code for answer in answers] == [200, 200]
    assert sorted(answer.json()["id"] for answer in answers) == sorted(job["id"] for job in jobs)


def test_a_full_waiting_budget_refuses_a_new_worker_and_probes_still_answer(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    """Issue 37: past JOBMATCH_MAX_WAITING_PULLS a pull of a worker with none waiting is a
    503 problem+json with Retry-After, counted; the probes, the admin and a worker already
    waiting (its newer pull supersedes its own) are served."""
    app = create_app(settings.model_copy(update={"max_waiting_pulls": 1}), database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        first = register(client, admin_headers, "f1", "language: ?java")
        second = register(client, admin_headers, "f2", "language: ?java")
        refusals_before = waiting_refusals(client)
        waiting = waiting_pull(client, database, "f1", first, WOKEN_DEADLINE)
        refused = client.post("/v1/workers/f2/pull", params={"wait": 30}, headers=second)
        body = assert_problem(refused, 503)
        assert "JOBMATCH_MAX_WAITING_PULLS" in body["detail"]
        assert refused.headers["Retry-After"] == "5"
        # A pull that does not wait is no waiting pull: it is served.
        assert client.post("/v1/workers/f2/pull", headers=second).status_code == 204
        for probe in ("/healthz", "/readyz", "/metrics"):
            assert client.get(probe).status_code == 200, probe
        assert client.get("/v1/workers", headers=admin_headers).status_code == 200
        # The counters are the process's: other tests of this process count there too.
        assert waiting_refusals(client) == refusals_before + 1
        # The waiting worker's own newer pull is admitted: it takes its place.
        newer = pull_in_thread(client, "f1", first, WOKEN_DEADLINE)
        response, _ = waiting.result(timeout=WOKEN_DEADLINE)
        assert response.headers[SUPERSEDED] == "true"
        until(lambda: hub_of(client).waiting == 1, "the newer pull")
        since = time.monotonic()
        assert_took(newer, submit(client, admin_headers, JAVA), since)
