"""The web console through Starlette's TestClient: sign-in and its cookie flags, the
server-side sessions (the cookie holds no token; sign-out, revocation and a new admin token
end them), CSRF and origin checks on every form, what a submitter may see and do, and the
404 pages."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import select, update

from app.api.app import create_app
from app.api.ui.session import CSRF_COOKIE, SESSION_COOKIE, SESSION_SECONDS
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import ApiToken, ConsoleSession, Worker, WorkerState
from app.db.tokens import hash_token
from app.matching import output
from app.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support.console_cluster import ConsoleCluster, load_console_cluster

pytestmark = pytest.mark.db

ORIGIN = {"Origin": "http://testserver"}
PAGES = ["/ui", "/ui/workers", "/ui/workers/docs-worker", "/ui/queue", "/ui/jobs", "/ui/fit"]


@pytest.fixture
def cluster(database: Database) -> ConsoleCluster:
    return load_console_cluster(database)


def _sign_in(client: TestClient, token: str) -> str:
    """Sign in; the session's CSRF token."""
    answer = client.post(
        "/ui/sign-in", data={"token": token}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui"
    csrf = client.cookies.get(CSRF_COOKIE)
    assert csrf
    return csrf


def _worker_state(database: Database, name: str) -> WorkerState:
    with database.transaction(write=False) as session:
        worker = session.query(Worker).filter_by(name=name).one()
        return worker.state


def _hidden_csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def test_pages_need_a_session(client: TestClient, cluster: ConsoleCluster) -> None:
    for path in [*PAGES, f"/ui/jobs/{cluster.bob_job}"]:
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/sign-in", path
    answer = client.post(
        "/ui/workers/java-box/drain", data={}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/sign-in"
    sign_in = client.get("/ui/sign-in")
    assert sign_in.status_code == 200 and 'name="viewport"' in sign_in.text


def test_the_session_cookie_is_httponly_and_samesite_strict(
    client: TestClient, cluster: ConsoleCluster
) -> None:
    answer = client.post(
        "/ui/sign-in", data={"token": ADMIN_TOKEN}, headers=ORIGIN, follow_redirects=False
    )
    cookies = answer.headers.get_list("set-cookie")
    assert {cookie.split("=", 1)[0] for cookie in cookies} == {SESSION_COOKIE, CSRF_COOKIE}
    for cookie in cookies:
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/ui"} <= flags, cookie
        assert "secure" not in flags, cookie  # served over plain http here


def test_the_cookies_are_secure_over_https(
    settings: Settings, database: Database, cluster: ConsoleCluster
) -> None:
    app = create_app(settings, database=database)
    with TestClient(app, base_url="https://testserver") as client:
        answer = client.post(
            "/ui/sign-in",
            data={"token": ADMIN_TOKEN},
            headers={"Origin": "https://testserver"},
            follow_redirects=False,
        )
    assert answer.status_code == 303
    for cookie in answer.headers.get_list("set-cookie"):
        assert "secure" in {part.strip().lower() for part in cookie.split(";")}, cookie


def test_unknown_revoked_and_worker_tokens_are_refused(
    client: TestClient, cluster: ConsoleCluster
) -> None:
    for token in ["nonsense", cluster.worker_token, "", "x" * 600]:
        answer = client.post("/ui/sign-in", data={"token": token}, headers=ORIGIN)
        assert answer.status_code == 401, token
        assert "unknown, revoked, or a worker" in answer.text
        assert SESSION_COOKIE not in client.cookies


def test_a_sign_in_from_another_origin_is_refused(
    client: TestClient, cluster: ConsoleCluster
) -> None:
    for headers in [{"Origin": "http://evil.example"}, {}]:
        answer = client.post("/ui/sign-in", data={"token": ADMIN_TOKEN}, headers=headers)
        assert answer.status_code == 403
        assert SESSION_COOKIE not in client.cookies


def test_every_page_renders_for_the_admin(client: TestClient, cluster: ConsoleCluster) -> None:
    _sign_in(client, ADMIN_TOKEN)
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["cache-control"] == "no-store"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    workers = client.get("/ui/workers").text
    for name in ["docs-worker", "java-box", "arm-runner", "gpu-node"]:
        assert f'data-worker="{name}"' in workers
    assert "1/2" in workers  # docs-worker runs alice's job on one of its two slots
    job = client.get(f"/ui/jobs/{cluster.alice_running}").text
    assert "language: python; python: 3.7" in job and "dispatched" in job
    assert 'id="cancel"' in job
    css = client.get("/ui/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_a_job_page_ranks_candidates_only_while_the_job_waits(
    client: TestClient, admin_headers: dict[str, str], cluster: ConsoleCluster
) -> None:
    _sign_in(client, cluster.alice_token)
    waiting = client.get(f"/ui/jobs/{cluster.alice_waiting}").text
    ranked = re.findall(r'<tr><td><a href="/ui/workers/([a-z-]+)">', waiting)
    api = client.get(f"/v1/jobs/{cluster.alice_waiting}/candidates", headers=admin_headers)
    assert ranked == [c["worker"] for c in api.json()["items"]] == ["arm-runner", "docs-worker"]
    running = client.get(f"/ui/jobs/{cluster.alice_running}").text
    assert "Candidates are computed for waiting jobs; this one is running on docs-worker" in (
        running
    )


def test_a_running_job_s_page_shows_the_output_its_worker_streamed(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    """Issue 22: output streamed while the job runs is readable in the console's job page,
    as through GET /v1/jobs/{id}/output (escaped: it is the job's text, not markup)."""
    _sign_in(client, cluster.alice_token)
    assert "Nothing printed yet." in client.get(f"/ui/jobs/{cluster.alice_running}").text
    with database.transaction() as session:
        output.append_output(
            session, cluster.alice_running, "docs-worker", 0, "step 1 <ok>\n", 1_048_576
        )
    page = client.get(f"/ui/jobs/{cluster.alice_running}").text
    assert '<pre class="output" id="output">step 1 &lt;ok&gt;\n</pre>' in page


def test_a_waiting_job_s_page_says_what_would_let_it_run(
    client: TestClient, admin_headers: dict[str, str], cluster: ConsoleCluster
) -> None:
    """The explain summary and verdicts of GET /v1/jobs/{id}/explain (app/matching/
    readiness.py), in the style of condor_q -better-analyze, on the job page."""
    csrf = _sign_in(client, ADMIN_TOKEN)
    client.post("/ui/workers/gpu-node/drain", data={"csrf": csrf}, headers=ORIGIN)
    waiting = client.get("/v1/jobs?state=waiting&limit=50", headers=admin_headers).json()
    (gpu_job,) = [j["id"] for j in waiting["items"] if "cuda" in j["resources"]]
    page = client.get(f"/ui/jobs/{gpu_job}").text
    explained = client.get(f"/v1/jobs/{gpu_job}/explain", headers=admin_headers).json()
    summary = explained["summary"]
    assert (summary["eligible"], summary["can_run_now"]) == (1, 0)
    assert (
        f"{summary['workers']} workers looked at: 1 eligible, 0 can run it now, 1 fit but busy"
    ) in page
    assert "To run it soonest: resume worker gpu-node (it is draining)." in page
    row = re.search(r'<tr data-worker="gpu-node">.*?</tr>', page, re.S)
    assert row and "worker-draining" in row.group(0)
    assert "3 fail first on" in page


def test_a_category_page_shows_its_fit_over_the_workers(
    client: TestClient, cluster: ConsoleCluster
) -> None:
    _sign_in(client, cluster.alice_token)
    job = client.get(f"/ui/jobs/{cluster.alice_waiting}").text
    found = re.search(r'href="/ui/categories/(\d+)"', job)
    assert found
    page = client.get(f"/ui/categories/{found.group(1)}").text
    assert 'id="category-request"><span class="tok">arch:~x86</span><' in page
    assert re.search(r'id="category-waiting">1 of yours<', page)
    rows = dict(
        re.findall(r'data-worker="([a-z-]+)">.*?<span class="reason reason-([a-z-]+)"', page, re.S)
    )
    assert rows == {
        "arm-runner": "fits",
        "docs-worker": "fits",
        "gpu-node": "worker-requires-tag",
        "java-box": "job-excludes-tag",
    }
    _sign_in(client, cluster.bob_token)  # bob has no job in alice's arch:~x86 category
    assert client.get(f"/ui/categories/{found.group(1)}").status_code == 404
    assert client.get("/ui/categories/999999").status_code == 404


def test_a_drain_needs_the_csrf_token_and_this_origin(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    cluster: ConsoleCluster,
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    page = client.get("/ui/workers/java-box").text
    assert _hidden_csrf(page) == csrf and 'id="drain"' in page
    refused = [
        ({}, ORIGIN),
        ({"csrf": "forged"}, ORIGIN),
        ({"csrf": csrf}, {"Origin": "http://evil.example"}),
        ({"csrf": csrf}, {"Referer": "http://evil.example/ui/workers/java-box"}),
        ({"csrf": csrf}, {}),
    ]
    for data, headers in refused:
        answer = client.post("/ui/workers/java-box/drain", data=data, headers=headers)
        assert answer.status_code == 403, (data, headers)
        assert _worker_state(database, "java-box") is WorkerState.ACTIVE
    too_long = {"csrf": csrf, "reason": "x" * 1025}
    answer = client.post("/ui/workers/java-box/drain", data=too_long, headers=ORIGIN)
    assert answer.status_code == 422 and "longer than 1024" in answer.text
    assert _worker_state(database, "java-box") is WorkerState.ACTIVE
    referer = {"Referer": "http://testserver/ui/workers/java-box"}
    drained = client.post(
        "/ui/workers/java-box/drain",
        data={"csrf": csrf, "reason": "kernel upgrade"},
        headers=referer,
        follow_redirects=False,
    )
    assert drained.status_code == 303 and drained.headers["location"] == "/ui/workers/java-box"
    worker = client.get("/v1/workers/java-box", headers=admin_headers).json()
    assert (worker["state"], worker["state_reason"]) == ("draining", "kernel upgrade")
    assert worker["resources"] and worker["queues"][0]["slots"] == 4  # nothing else changed
    page = client.get("/ui/workers/java-box").text
    assert 'id="resume"' in page and "kernel upgrade" in page and "set by admin" in page
    client.post("/ui/workers/java-box/resume", data={"csrf": csrf}, headers=ORIGIN)
    assert _worker_state(database, "java-box") is WorkerState.ACTIVE


def test_an_admin_cancels_a_job(
    client: TestClient, admin_headers: dict[str, str], cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    assert client.post(f"/ui/jobs/{cluster.bob_job}/cancel", headers=ORIGIN).status_code == 403
    answer = client.post(f"/ui/jobs/{cluster.bob_job}/cancel", data={"csrf": csrf}, headers=ORIGIN)
    assert answer.status_code == 200 and 'id="job-state">cancelled' in answer.text
    assert client.get(f"/v1/jobs/{cluster.bob_job}", headers=admin_headers).json()["state"] == (
        "cancelled"
    )
    again = client.post(f"/ui/jobs/{cluster.bob_job}/cancel", data={"csrf": csrf}, headers=ORIGIN)
    assert again.status_code == 409 and "only waiting or running jobs" in again.text


def test_a_submitter_sees_its_own_jobs_only(client: TestClient, cluster: ConsoleCluster) -> None:
    _sign_in(client, cluster.alice_token)
    jobs = client.get("/ui/jobs").text
    shown = set(map(int, re.findall(r'data-job="(\d+)"', jobs)))
    assert shown == {cluster.alice_running, cluster.alice_waiting}
    assert client.get(f"/ui/jobs/{cluster.alice_waiting}").status_code == 200
    other = client.get(f"/ui/jobs/{cluster.bob_job}")
    assert other.status_code == 404 and "that you may see" in other.text
    overview = client.get("/ui").text
    assert re.search(r'data-state="waiting">1<', overview), overview
    assert re.search(r'data-state="running">1<', overview), overview
    queue = client.get("/ui/queue").text
    assert len(re.findall(r"data-category=", queue)) == 1  # alice's one waiting category
    fit = client.get("/ui/fit").text
    assert fit.count('<th scope="row"') == 2  # the categories of alice's two live jobs


def test_a_submitter_has_no_admin_actions(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, cluster.alice_token)
    worker = client.get("/ui/workers/docs-worker").text
    assert 'id="drain"' not in worker and 'id="resume"' not in worker
    assert 'id="cancel"' not in client.get(f"/ui/jobs/{cluster.alice_waiting}").text
    for path in [
        "/ui/workers/docs-worker/drain",
        "/ui/workers/docs-worker/resume",
        f"/ui/jobs/{cluster.alice_waiting}/cancel",
    ]:
        answer = client.post(path, data={"csrf": csrf}, headers=ORIGIN)
        assert answer.status_code == 403, path
        assert "needs the admin token" in answer.text
    assert _worker_state(database, "docs-worker") is WorkerState.ACTIVE


def test_missing_things_are_404_pages(client: TestClient, cluster: ConsoleCluster) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    for path in ["/ui/workers/nobody", "/ui/jobs/999999", "/ui/static/nothing.js"]:
        assert client.get(path).status_code == 404, path
    drain = client.post("/ui/workers/nobody/drain", data={"csrf": csrf}, headers=ORIGIN)
    assert drain.status_code == 404 and "no worker named &#39;nobody&#39;" in drain.text
    assert client.get("/ui/nowhere").status_code == 404


def test_a_form_with_too_many_fields_is_a_422_page(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    fields = "&".join(f"f{i}=x" for i in range(30))
    headers = {**ORIGIN, "Content-Type": "application/x-www-form-urlencoded"}
    for path in ["/ui/workers/java-box/drain", "/ui/sign-in"]:
        answer = client.post(path, content=f"csrf={csrf}&{fields}", headers=headers)
        assert answer.status_code == 422, path
        assert "at most 20 fields" in answer.text
    assert _worker_state(database, "java-box") is WorkerState.ACTIVE


def test_sign_out_ends_the_session(client: TestClient, cluster: ConsoleCluster) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    assert client.post("/ui/sign-out", data={}, headers=ORIGIN).status_code == 403
    answer = client.post(
        "/ui/sign-out", data={"csrf": csrf}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/sign-in"
    assert client.get("/ui", follow_redirects=False).status_code == 303


def test_the_console_is_not_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/ui")]


def _session_rows(database: Database) -> list[ConsoleSession]:
    with database.transaction(write=False) as session:
        rows = list(session.scalars(select(ConsoleSession).order_by(ConsoleSession.id)))
        session.expunge_all()
        return rows


def test_the_cookie_holds_a_session_id_whose_hash_alone_is_stored(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    _sign_in(client, ADMIN_TOKEN)
    session_id = client.cookies.get(SESSION_COOKIE)
    assert session_id and ADMIN_TOKEN not in session_id
    client.cookies.clear()  # another browser
    _sign_in(client, cluster.alice_token)
    alice_id = client.cookies.get(SESSION_COOKIE)
    assert alice_id and alice_id != session_id and cluster.alice_token not in alice_id
    admin_row, alice_row = _session_rows(database)
    assert admin_row.session_hash == hash_token(session_id)
    assert admin_row.token_id is None and admin_row.admin_fingerprint is not None
    assert alice_row.session_hash == hash_token(alice_id) and alice_row.token_id is not None
    for row in (admin_row, alice_row):
        stored = " ".join(str(value) for value in vars(row).values())
        for secret in (session_id, alice_id, ADMIN_TOKEN, cluster.alice_token):
            assert secret not in stored
        assert row.expires_at - row.created_at == timedelta(seconds=SESSION_SECONDS)


def test_a_new_sign_in_ends_the_browser_s_previous_session(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    _sign_in(client, cluster.alice_token)
    first = client.cookies.get(SESSION_COOKIE)
    _sign_in(client, ADMIN_TOKEN)
    (row,) = _session_rows(database)
    assert row.token_id is None and row.session_hash != hash_token(first or "")


def test_sign_out_revokes_the_session_server_side(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    session_id = client.cookies.get(SESSION_COOKIE)
    assert session_id is not None
    client.post("/ui/sign-out", data={"csrf": csrf}, headers=ORIGIN, follow_redirects=False)
    assert _session_rows(database) == []
    # The old cookie, sent again as a copy of it would be, opens nothing.
    client.cookies.set(SESSION_COOKIE, session_id, path="/ui")
    client.cookies.set(CSRF_COOKIE, csrf, path="/ui")
    answer = client.get("/ui", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/sign-in"


def test_revoking_a_token_revokes_its_sessions(
    client: TestClient, database: Database, cluster: ConsoleCluster, admin_headers: dict[str, str]
) -> None:
    issued = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "carol"}, headers=admin_headers
    ).json()
    _sign_in(client, issued["token"])
    assert client.get("/ui/jobs").status_code == 200
    client.cookies.clear()  # another browser, with another token's session, left alone
    _sign_in(client, cluster.alice_token)
    alice_cookie = client.cookies.get(SESSION_COOKIE)
    client.cookies.set(SESSION_COOKIE, "", path="/ui")
    assert len(_session_rows(database)) == 2
    revoked = client.delete(f"/v1/tokens/{issued['id']}", headers=admin_headers)
    assert revoked.status_code == 200
    rows = _session_rows(database)
    assert [row.session_hash for row in rows] == [hash_token(alice_cookie or "")]


def test_a_revoked_token_s_session_is_refused_at_once(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    _sign_in(client, cluster.alice_token)
    assert client.get("/ui/jobs").status_code == 200
    # Revoked behind the console's back (another process, a restored backup): the
    # session is read joined to its token, so it is refused even with its row still there.
    with database.transaction() as session:
        session.execute(
            update(ApiToken).where(ApiToken.subject == "alice").values(revoked_at=utcnow())
        )
    assert len(_session_rows(database)) == 1
    assert client.get("/ui/jobs", follow_redirects=False).status_code == 303


def test_changing_the_admin_token_ends_its_sessions(
    settings: Settings, database: Database, cluster: ConsoleCluster
) -> None:
    with TestClient(create_app(settings, database=database)) as before:
        _sign_in(before, ADMIN_TOKEN)
        session_id = before.cookies.get(SESSION_COOKIE)
        csrf = before.cookies.get(CSRF_COOKIE)
    changed = settings.model_copy(update={"admin_token": SecretStr("a-new-admin-token")})
    with TestClient(create_app(changed, database=database)) as after:
        after.cookies.set(SESSION_COOKIE, session_id or "", path="/ui")
        after.cookies.set(CSRF_COOKIE, csrf or "", path="/ui")
        answer = after.get("/ui", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/sign-in"
    with TestClient(create_app(settings, database=database)) as same:
        same.cookies.set(SESSION_COOKIE, session_id or "", path="/ui")
        same.cookies.set(CSRF_COOKIE, csrf or "", path="/ui")
        assert same.get("/ui", follow_redirects=False).status_code == 200


def test_expired_sessions_are_refused_and_deleted_at_the_next_sign_in(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    _sign_in(client, cluster.alice_token)
    with database.transaction() as session:
        session.execute(update(ConsoleSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.get("/ui", follow_redirects=False).status_code == 303
    _sign_in(client, ADMIN_TOKEN)
    (row,) = _session_rows(database)
    assert row.token_id is None and row.expires_at > utcnow()
