"""The web console in a real browser: headless Chromium (Debian's package) driven by
Playwright against a live `jobmatch serve` with a small cluster, on every configured
database. Every page renders with its data, a drain click drains (checked through the
JSON API), a submitter cannot reach the admin actions, a POST without the CSRF token is
refused. Each page's screenshot is written under the test's tmp_path (paths printed; run
with -s to see them).

Playwright's own browser download cannot work here, so the tests launch /usr/bin/chromium;
without it they skip, saying how to install it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.engine import Database
from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer
from tests.support.console_cluster import ConsoleCluster, load_console_cluster

pytestmark = pytest.mark.db

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN = LIVE_ADMIN_TOKEN

if not CHROMIUM.exists():
    pytest.skip(
        "Chromium is not installed: `apt-get install -y chromium` (Debian's package, "
        "/usr/bin/chromium) to run the console's browser tests",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        launched.close()


@pytest.fixture
def cluster(database: Database) -> ConsoleCluster:
    return load_console_cluster(database)


@pytest.fixture
def server(shared_server: LiveServer, cluster: ConsoleCluster) -> LiveServer:
    """The test process's shared server (tests/conftest.py), on the console's cluster."""
    return shared_server


class Screens:
    """Screenshots of the pages under the test's tmp_path, their paths printed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def take(self, page: Page, name: str) -> Path:
        path = self.directory / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path


def _sign_in(page: Page, server: LiveServer, token: str) -> None:
    page.goto(f"{server.base_url}/ui")
    expect(page).to_have_url(f"{server.base_url}/ui/sign-in")
    page.fill("#token", token)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{server.base_url}/ui")


def _post_from_page(page: Page, path: str, csrf: bool) -> int:
    """Submit a form the page's script builds (as a forged or hand-made form would be;
    Chromium adds the Origin header), with or without the session's CSRF token from the
    page's hidden field; the answer's status. The console's Content-Security-Policy
    allows no fetch, so a form it is."""
    with page.expect_navigation() as navigation:
        page.evaluate(
            """([path, withCsrf]) => {
                const form = document.createElement("form");
                form.method = "post";
                form.action = path;
                if (withCsrf) {
                    const field = document.createElement("input");
                    field.type = "hidden";
                    field.name = "csrf";
                    field.value = document.querySelector("input[name=csrf]").value;
                    form.appendChild(field);
                }
                document.body.appendChild(form);
                form.submit();
            }""",
            [path, csrf],
        )
    answer = navigation.value
    assert answer is not None and answer.url.endswith(path), answer
    return answer.status


def test_every_page_renders_and_a_drain_click_drains(
    browser: Browser, server: LiveServer, cluster: ConsoleCluster, tmp_path: Path
) -> None:
    screens = Screens(tmp_path)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{server.base_url}/ui")
    screens.take(page, "sign-in")
    _sign_in(page, server, ADMIN)

    expect(page.locator("#workers-by-state td[data-state=active]")).to_have_text("4")
    expect(page.locator("#jobs-by-state td[data-state=running]")).to_have_text("1")
    expect(page.locator("#oldest-waiting")).to_contain_text("job ")
    expect(page.locator("#dispatches")).to_contain_text("Dispatches per minute")
    screens.take(page, "overview")

    page.click("nav >> text=Workers")
    for name in ["arm-runner", "docs-worker", "gpu-node", "java-box"]:
        expect(page.locator(f"tr[data-worker={name}]")).to_be_visible()
    expect(page.locator("tr[data-worker=docs-worker]")).to_contain_text("1/2")
    screens.take(page, "workers")

    page.click("tr[data-worker=docs-worker] a")
    expect(page.locator("#running")).to_contain_text(str(cluster.alice_running))
    expect(page.locator("#misfits")).to_contain_text("job-requires-tag")
    screens.take(page, "worker")

    page.click("nav >> text=Queue")
    expect(page.locator("#queue tbody tr").first).to_be_visible()
    expect(page.locator("#queue")).to_contain_text("arch:~x86")
    screens.take(page, "queue")

    page.click("nav >> text=Jobs")
    expect(page.locator(f"tr[data-job='{cluster.bob_job}']")).to_be_visible()
    screens.take(page, "jobs")

    page.goto(f"{server.base_url}/ui/jobs/{cluster.alice_running}")
    expect(page.locator("#request")).to_contain_text("language: python; python: 3.7")
    expect(page.locator("#history")).to_contain_text("dispatched")
    expect(page.locator("#candidates")).to_contain_text("running on docs-worker")
    expect(page.locator("#explain-summary")).to_contain_text("1 of 4 worker(s) eligible")
    screens.take(page, "job")

    page.goto(f"{server.base_url}/ui/jobs/{cluster.alice_waiting}")
    expect(page.locator("#candidates")).to_contain_text("arm-runner")
    # Both workers that fit it would start another waiting job first (issue 35: explain
    # says what their next pull does): outranked, not runnable now.
    expect(page.locator("#explain-summary")).to_contain_text("0 can run it now")
    expect(page.locator("#explain-answers")).to_contain_text("2 outranked")
    screens.take(page, "job-waiting")
    page.click("dd >> a[href^='/ui/categories/']")
    expect(page.locator("#category-request")).to_have_text("arch:~x86")
    expect(page.locator("#category-fit tr[data-worker=java-box]")).to_contain_text(
        "job-excludes-tag"
    )
    screens.take(page, "category")

    page.click("nav >> text=Fit matrix")
    expect(page.locator("#reason-counts")).to_contain_text("job-requires-tag")
    expect(page.locator("#matrix td.reason-fits").first).to_be_visible()
    screens.take(page, "fit")

    page.goto(f"{server.base_url}/ui/workers/java-box")
    page.fill("#reason", "kernel upgrade")
    page.click("#drain")
    expect(page.locator("#worker-state")).to_contain_text("draining")
    expect(page.locator("#state-reason")).to_have_text("kernel upgrade")
    status, worker = server.request("GET", "/v1/workers/java-box")
    assert status == 200 and worker["state"] == "draining"
    assert worker["state_reason"] == "kernel upgrade"
    assert worker["resources"] and worker["queues"][0]["slots"] == 4  # nothing else changed
    screens.take(page, "worker-drained")

    assert _post_from_page(page, "/ui/workers/java-box/resume", csrf=False) == 403
    assert server.request("GET", "/v1/workers/java-box")[1]["state"] == "draining"
    page.goto(f"{server.base_url}/ui/workers/java-box")
    page.click("#resume")
    expect(page.locator("#worker-state")).to_contain_text("active")
    assert server.request("GET", "/v1/workers/java-box")[1]["state"] == "active"
    context.close()


def test_a_phone_sees_the_pages_without_sideways_scrolling(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    screens = Screens(tmp_path)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    _sign_in(page, server, ADMIN)
    pages = [
        ("/ui", "phone-overview"),
        ("/ui/workers/docs-worker", "phone-worker"),
        ("/ui/jobs/1", "phone-job"),
        ("/ui/fit", "phone-fit"),
    ]
    for path, name in pages:
        page.goto(f"{server.base_url}{path}")
        # clientWidth: the layout viewport (a phone's innerWidth grows to fit wide content).
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (path, overflow)
        screens.take(page, name)
    context.close()


def test_a_submitter_cannot_reach_admin_actions(
    browser: Browser, server: LiveServer, cluster: ConsoleCluster, tmp_path: Path
) -> None:
    screens = Screens(tmp_path)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    _sign_in(page, server, cluster.alice_token)
    expect(page.locator("[data-role=submitter]")).to_contain_text("alice")
    page.goto(f"{server.base_url}/ui/jobs")
    expect(page.locator("#jobs tbody tr")).to_have_count(2)
    page.goto(f"{server.base_url}/ui/workers/docs-worker")
    expect(page.locator("#drain")).to_have_count(0)
    screens.take(page, "submitter-worker")
    assert _post_from_page(page, "/ui/workers/docs-worker/drain", csrf=True) == 403
    assert server.request("GET", "/v1/workers/docs-worker")[1]["state"] == "active"
    page.goto(f"{server.base_url}/ui/jobs/{cluster.alice_waiting}")
    expect(page.locator("#cancel")).to_have_count(0)
    assert _post_from_page(page, f"/ui/jobs/{cluster.alice_waiting}/cancel", csrf=True) == 403
    page.goto(f"{server.base_url}/ui/jobs/{cluster.bob_job}")
    expect(page.locator("h1")).to_have_text("404")
    screens.take(page, "submitter-other-job")
    context.close()


def test_a_what_if_pasted_in_the_form_shows_its_answer_and_stores_nothing(
    browser: Browser, server: LiveServer, cluster: ConsoleCluster, tmp_path: Path
) -> None:
    screens = Screens(tmp_path)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    _sign_in(page, server, ADMIN)
    page.click("nav >> text=What-if")
    expect(page.locator("#changes")).to_contain_text("add_workers")
    screens.take(page, "whatif-form")

    changes = json.dumps({"drain_workers": ["java-box"], "explain_job": cluster.bob_job})
    page.fill("#changes", changes)
    page.click("#run-whatif")

    status, api = server.request(
        "POST", "/v1/whatif", {"drain_workers": ["java-box"], "explain_job": cluster.bob_job}
    )
    assert status == 200, api
    shown = ", ".join(str(i) for i in api["no_longer_runnable"]) or "none"
    expect(page.locator("#no-longer-runnable")).to_have_text(shown)
    expect(page.locator("#first-pulls tr[data-worker=java-box]")).to_contain_text("nothing")
    expect(page.locator("#lost")).to_have_text(", ".join(api["explain_job"]["lost"]) or "none")
    expect(page.locator("#changes")).to_have_value(changes)
    screens.take(page, "whatif-answer")
    assert server.request("GET", "/v1/workers/java-box")[1]["state"] == "active"

    page.fill("#changes", '{"drain_workers": ["ghost"]}')
    page.click("#run-whatif")
    expect(page.locator("#whatif-problems")).to_contain_text("no worker named 'ghost'")
    screens.take(page, "whatif-refused")
    context.close()


def test_a_job_page_shows_its_queue_lists_and_why_other_queues_cannot_run_it(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    """qsub(1) -q and -soft -q on the job page, with qstat -j's words for an instance
    outside the -q list (MSG_SCHEDD_INFO_NOTINHARDQUEUELST_S of Grid Engine 6.2u5)."""
    # The queues must exist: qsub refuses a -q or -soft -q that names none (issue 36).
    queues = [{"name": "batch.q", "slots": 1}, {"name": "fast.q", "slots": 1}]
    status, _ = server.request("POST", "/v1/workers", {"name": "batch-box", "queues": queues})
    assert status == 201
    status, job = server.request(
        "POST", "/v1/jobs", {"queue_list": "batch.q@*", "soft_queue_list": "fast.q"}
    )
    assert status == 201 and job["state"] == "waiting", job
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    _sign_in(page, server, ADMIN)
    page.goto(f"{server.base_url}/ui/jobs/{job['id']}")
    expect(page.locator("#request")).to_contain_text("hard -q (Grid Engine)")
    expect(page.locator("#request")).to_contain_text("batch.q@*")
    expect(page.locator("#request")).to_contain_text("soft -q (Grid Engine)")
    expect(page.locator("#scheduling-info")).to_contain_text(
        'cannot run in queue "default@java-box" because it is not contained in its hard '
        "queue list (-q)"
    )
    Screens(tmp_path).take(page, "job-queue-lists")
    context.close()
