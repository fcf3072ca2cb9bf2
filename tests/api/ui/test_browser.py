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
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.api.ui.session import SESSION_COOKIE
from app.db.engine import Database
from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer
from tests.support.console_cluster import ConsoleCluster, load_console_cluster
from tests.support.demand_cluster import load_demand_cluster
from tests.support.http_api import answer_of as _ok

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
    expect(page.locator("#explain-summary")).to_contain_text("1 of 4 workers eligible")
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
        ("/ui/demand", "phone-demand"),
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


#: The widths every console page is looked at: a laptop's window and a phone's screen.
WIDTHS = {"wide": 1400, "phone": 390}

#: Where the screenshots of :func:`test_every_page_at_both_widths` go when set: its
#: subdirectory named after the database (made if missing); the test's tmp_path
#: otherwise. Either way each path is printed (run with -s).
SCREENSHOTS_ENV = "JOBMATCH_CONSOLE_SCREENSHOTS"

COMMAND = ["python3", "-c", 'print("hi")']


@dataclass(frozen=True)
class RichCluster:
    """What :func:`_flux_and_grid_engine` adds to the console's cluster."""

    several_nodes: int
    requires_job: int
    jobspec_job: int
    gridengine_job: int
    finished: int


def _flux_and_grid_engine(server: LiveServer) -> RichCluster:
    """A Flux node with a rank, properties, an inventory and Grid Engine values, and jobs
    in every notation the console must show as written: shapes, an RFC 35 constraint, an
    RFC 14 jobspec, a Grid Engine -l list and a command that ran and ended."""
    node = _ok(
        server.request(
            "POST",
            "/v1/workers",
            {
                "name": "flux-node",
                "rank": 0,
                "properties": ["ssd", "ib"],
                "slots": 8,
                "inventory": "node/[socket=2/[core=16;gpu=2];memory=256{unit:GB}]",
            },
        )
    )
    _ok(
        server.request(
            "PUT",
            "/v1/values/hosts/flux-node",
            {"complex_values": {"h_vmem": "64G"}, "load_values": {"arch": "lx-amd64"}},
        )
    )
    submit = {
        "ran": {"shape": "slot/core=2", "priority": 20, "command": COMMAND},
        "several": {"shape": "node=3/slot/core=8"},
        "requires": {"shape": "slot/core=4", "requires": "ssd,ib | host:node[1-4]"},
        "jobspec": {
            "jobspec": [
                {
                    "type": "slot",
                    "count": 1,
                    "label": "task",
                    "with": [{"type": "core", "count": 2}],
                }
            ]
        },
        "gridengine": {"hard": "arch=lx-amd64,h_vmem=2G"},
    }
    ids = {
        name: _ok(server.request("POST", "/v1/jobs", body))["id"] for name, body in submit.items()
    }
    pulled = _ok(server.request("POST", "/v1/workers/flux-node/pull", token=node["token"]))
    assert pulled["id"] == ids["ran"], pulled
    _ok(
        server.request(
            "POST",
            f"/v1/jobs/{ids['ran']}/finish",
            {"outcome": "finished", "exit_code": 0, "output": "hi\n"},
            token=node["token"],
        )
    )
    return RichCluster(
        ids["several"], ids["requires"], ids["jobspec"], ids["gridengine"], ids["ran"]
    )


#: Whether a token of the page's text sits on one line: the rectangles of a range over it
#: in the first element that holds it (None when no element holds it).
_TOKEN_LINES = """([selector, token]) => {
    for (const element of document.querySelectorAll(selector)) {
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        const text = element.textContent;
        const at = text.indexOf(token);
        if (at < 0) continue;
        // Find the text node and offset of the token's first and last characters.
        let seen = 0, start = null, end = null;
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const length = node.textContent.length;
            if (start === null && at < seen + length) start = [node, at - seen];
            if (at + token.length <= seen + length) {
                end = [node, at + token.length - seen];
                break;
            }
            seen += length;
        }
        const range = document.createRange();
        range.setStart(start[0], start[1]);
        range.setEnd(end[0], end[1]);
        return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
    }
    return null;
}"""


def _lines_of(page: Page, selector: str, token: str) -> int | None:
    return page.evaluate(_TOKEN_LINES, [selector, token])


def _scroll_hint(page: Page, table: str) -> dict[str, Any]:
    """How the box around a table scrolls: whether it overflows, and whether the note
    under it shows (and what it says)."""
    return page.evaluate(
        """(table) => {
            const box = document.getElementById(table).closest(".scroll");
            return {
                overflows: box.scrollWidth > box.clientWidth + 1,
                note: getComputedStyle(box, "::after").content,
                shown: getComputedStyle(box, "::after").content !== "none"
                    && getComputedStyle(box, "::after").visibility === "visible",
                overflowX: getComputedStyle(box).overflowX,
            };
        }""",
        table,
    )


def test_every_page_at_both_widths(
    browser: Browser, server: LiveServer, cluster: ConsoleCluster, tmp_path: Path, backend: str
) -> None:
    """Every console page at 1400 and 390 pixels, each screenshotted, with what issue 39
    found wrong checked as a person sees it: requests as they were written and never
    broken inside a token, readable fit-matrix labels, a worker's resources, the jobs
    list's request, command and filter, a job's exit code and quoted command, the
    sparkline's axis, and tables that scroll sideways on a phone and say so."""
    rich = _flux_and_grid_engine(server)
    configured = os.environ.get(SCREENSHOTS_ENV)
    directory = Path(configured) / backend if configured else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    screens = Screens(directory)
    base = server.base_url
    for label, width in WIDTHS.items():
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()

        def shot(name: str, label: str = label, page: Page = page) -> None:
            if label == "phone":
                # clientWidth: the layout viewport; a table scrolls in its own box.
                overflow = page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert overflow <= 1, (name, overflow)
            screens.take(page, f"{label}-{name}")

        page.goto(f"{base}/ui")
        shot("sign-in")
        _sign_in(page, server, ADMIN)
        # The browser holds a session id, never the token it signed in with.
        (session_cookie,) = [c for c in context.cookies() if c["name"] == SESSION_COOKIE]
        assert ADMIN not in session_cookie["value"] and session_cookie["httpOnly"]

        expect(page.locator("#sparkline .spark-axis")).to_contain_text("0")
        expect(page.locator("#sparkline .spark-times")).to_contain_text("UTC")
        expect(page.locator("#sparkline figcaption")).to_contain_text("peak")
        shot("overview")

        page.goto(f"{base}/ui/workers")
        expect(page.locator("tr[data-worker=flux-node]")).to_be_visible()
        if label == "phone":
            hint = _scroll_hint(page, "workers")
            assert hint["overflows"] and hint["overflowX"] == "auto", hint
            assert "scroll sideways" in hint["note"] and hint["shown"], hint
        shot("workers")

        page.goto(f"{base}/ui/workers/flux-node")
        expect(page.locator("#worker-rank")).to_have_text("0")
        expect(page.locator("#worker-properties")).to_have_text("ib, ssd")
        expect(page.locator("#worker-inventory")).to_contain_text(
            "node/[socket=2/[core=16;gpu=2];memory=256{unit:GB}]"
        )
        expect(page.locator("#worker-values tr[data-attribute=h_vmem]")).to_contain_text("64G")
        expect(page.locator("#worker-values tr[data-attribute=arch]")).to_contain_text("lx-amd64")
        expect(page.locator("#worker-queues")).to_contain_text("default@flux-node")
        shot("worker-flux")
        page.goto(f"{base}/ui/workers/docs-worker")
        expect(page.locator("#worker-resources")).to_contain_text("language: ?java, ?python")
        shot("worker-tags")

        page.goto(f"{base}/ui/queue")
        queue = page.locator("#queue")
        expect(queue).to_contain_text("shape node=3/slot/core=8")
        expect(queue).to_contain_text("requires ib,ssd | host:node[1-4]")
        expect(queue).to_contain_text("-l arch=lx-amd64,h_vmem=2G")
        assert '"type"' not in (queue.text_content() or "")  # no RFC 14 JSON
        for token in ["node=3/slot/core=8", "host:node[1-4]", "arch=lx-amd64,"]:
            assert _lines_of(page, "#queue td.request", token) == 1, token
        oldest = page.locator("#queue tbody tr td:nth-child(4)").first
        assert oldest.evaluate("cell => getComputedStyle(cell).whiteSpace") == "nowrap"
        shot("queue")

        page.goto(f"{base}/ui/jobs")
        expect(page.locator("#job-filters a.current")).to_have_text("all")
        finished = page.locator(f"tr[data-job='{rich.finished}']")
        expect(finished.locator("td.request")).to_have_text("shape slot/core=2")
        expect(finished.locator("td.command")).to_have_text("python3 -c 'print(\"hi\")'")
        expect(page.locator(f"tr[data-job='{rich.jobspec_job}'] td.request")).to_contain_text(
            "jobspec ["
        )
        shot("jobs")
        page.click("#job-filters >> text=waiting")
        expect(page.locator("#job-filters a.current")).to_have_text("waiting")
        expect(page.locator("#job-filters a[aria-current=page]")).to_have_count(1)
        shot("jobs-waiting")

        page.goto(f"{base}/ui/jobs/{rich.finished}")
        expect(page.locator("#exit-code")).to_have_text("0")
        expect(page.locator("#request pre[data-field=command]")).to_have_text(
            "python3 -c 'print(\"hi\")'"
        )
        expect(page.locator("#request pre[data-field='shape (RFC 46)']")).to_have_text(
            "slot/core=2"
        )
        expect(page.locator("#output")).to_have_text("hi")
        # The note shows under a table that scrolls, and under no other.
        candidates = _scroll_hint(page, "candidates")
        assert not candidates["overflows"] and not candidates["shown"], candidates
        shot("job-finished")
        page.goto(f"{base}/ui/jobs/{rich.several_nodes}")
        expect(page.locator("#exit-code")).to_contain_text("not yet")
        shot("job-waiting")
        page.goto(f"{base}/ui/jobs/{cluster.alice_waiting}")
        # Each code once per worker, its clauses under it.
        java_box = page.locator("#explain tr[data-worker=java-box]")
        expect(java_box.locator(".reason")).to_have_count(2)
        shot("job-clauses")

        page.goto(f"{base}/ui/fit")
        label_cell = page.locator("#matrix tr[data-category] th:has-text('node=3/slot/core=8')")
        expect(label_cell).to_contain_text("shape node=3/slot/core=8")
        assert "…" not in (page.locator("#matrix tbody").text_content() or "")
        assert "..." not in (page.locator("#matrix tbody").text_content() or "")
        assert "node=3/slot/core=8" in (label_cell.get_attribute("title") or "")
        assert _lines_of(page, "#matrix th.category-label", "node=3/slot/core=8") == 1
        shot("fit")
        label_cell.locator("a").click()
        expect(page.locator("#category-request")).to_have_text("shape node=3/slot/core=8")
        shot("category")

        page.goto(f"{base}/ui/whatif")
        shot("whatif-form")
        changes = json.dumps(
            {"drain_workers": ["flux-node"], "add_jobs": [{"shape": "node=2/slot/core=4"}]}
        )
        page.fill("#changes", changes)
        page.click("#run-whatif")
        categories = page.locator("#whatif-categories")
        expect(categories).to_contain_text("shape node=2/slot/core=4 (new: add_jobs #0)")
        expect(categories).to_contain_text("requires ib,ssd | host:node[1-4]")
        shot("whatif-answer")

        page.goto(f"{base}/ui/jobs/999999")
        expect(page.locator("h1")).to_have_text("404")
        shot("not-found")
        context.close()


def test_the_demand_page_says_what_waits_and_what_to_add(
    browser: Browser, shared_server: LiveServer, tmp_path: Path
) -> None:
    """Issue 40's cluster: the java-17 and 3-node jobs never run today, the java-11 ones
    wait for capacity; the page suggests one java17-box and one node-8core."""
    server = shared_server
    cluster = load_demand_cluster(
        lambda method, path, body, token: server.request(method, path, body, token)
    )
    screens = Screens(tmp_path)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    _sign_in(page, server, ADMIN)
    page.click("nav >> text=Demand")
    expect(page).to_have_url(f"{server.base_url}/ui/demand")

    totals = page.locator("#demand-totals")
    expect(totals.locator("tr[data-answer=never] td").nth(1)).to_have_text("2")
    expect(totals.locator("tr[data-answer=capacity] td").nth(1)).to_have_text("3")
    java17 = page.locator(f"#demand-categories tr[data-category='{cluster.java17}']")
    expect(java17).to_have_attribute("data-answer", "never")
    expect(java17).to_contain_text("no worker offers tag '17' in group 'java'")
    expect(java17.locator("td").last).to_have_text("java17-box")
    three = page.locator(f"#demand-categories tr[data-category='{cluster.three_nodes}']")
    expect(three).to_have_attribute("data-answer", "never")
    expect(three).to_contain_text("24 core")
    java11 = page.locator(f"#demand-categories tr[data-category='{cluster.java11}']")
    expect(java11).to_have_attribute("data-answer", "capacity")
    expect(java11.locator("td").nth(2)).to_have_text("3")
    expect(page.locator("#demand-mix tr[data-template=java17-box] td").nth(1)).to_have_text("1")
    expect(page.locator("#demand-mix tr[data-template=node-8core] td").nth(1)).to_have_text("1")
    expect(page.locator("#demand-mix-summary")).to_have_text(
        "Add 2 workers, costing 4.0 in all: they would start 2 waiting jobs."
    )
    unrunnable = page.locator("#demand-unrunnable tbody tr")
    expect(unrunnable).to_have_count(1)
    expect(unrunnable).to_have_attribute("data-category", str(cluster.java11))
    screens.take(page, "demand")

    page.click("text=Without templates")
    expect(page.locator("#demand-mix")).to_have_count(0)
    expect(page.locator("#demand-templates tr[data-template=java17-box] td").last).to_have_text("—")
    screens.take(page, "demand-without-templates")
    context.close()


@pytest.fixture
def group_server(database_url: str, database: Database, tmp_path: Path) -> Iterator[LiveServer]:
    """A server of its own ordering by group share (the shared one keeps today's order)."""
    running = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={
            "JOBMATCH_ORDERING": "group-share,fair-share,priority,age",
            "JOBMATCH_LEASE_SWEEP_SECONDS": "0",
        },
    )
    running.start()
    yield running
    running.stop()


def _groups_and_usage(server: LiveServer) -> None:
    """course-a (alice and bob, weight 2), course-b (carol) and dave without a group;
    alice's 8-slot job, carol's 6-slot one and dave's 2-slot one run a second together
    (about 8, 6 and 2 slot-seconds: per weight dave 2, course-a 4, course-b 6); bob and
    carol wait."""
    for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
        _ok(server.request("PUT", f"/v1/shares/{name}", {"weight": 1, "group": group}))
    _ok(server.request("PUT", "/v1/groups/course-a", {"weight": 2}))
    worker = _ok(server.request("POST", "/v1/workers", {"name": "w", "slots": 16}))["token"]
    tokens = {
        name: _ok(server.request("POST", "/v1/tokens", {"role": "submitter", "subject": name}))[
            "token"
        ]
        for name in ("alice", "bob", "carol", "dave")
    }
    for name, slots in (("alice", 8), ("carol", 6), ("dave", 2)):
        _ok(server.request("POST", "/v1/jobs", {"slots": slots}, tokens[name]))
    running = [_ok(server.request("POST", "/v1/workers/w/pull", token=worker))["id"] for _ in "abc"]
    time.sleep(1.0)
    for job in running:
        _ok(server.request("POST", f"/v1/jobs/{job}/finish", {"outcome": "finished"}, worker))
    for name in ("bob", "carol"):
        _ok(server.request("POST", "/v1/jobs", {"command": COMMAND}, tokens[name]))


def test_the_queue_shows_usage_against_share_by_group_at_both_widths(
    browser: Browser, group_server: LiveServer, tmp_path: Path
) -> None:
    """Under group-share the queue page lists each submitter's group beside its share and
    a table of the groups, furthest below its share first (dave alone, then course-a,
    then course-b), with weight, share, usage and members; on a phone the page does not
    scroll sideways (the tables do, inside their boxes)."""
    server = group_server
    _groups_and_usage(server)
    screens = Screens(tmp_path)
    for width_name, width in WIDTHS.items():
        context = browser.new_context(
            viewport={"width": width, "height": 900}, is_mobile=width_name == "phone"
        )
        page = context.new_page()
        _sign_in(page, server, ADMIN)
        page.goto(f"{server.base_url}/ui/queue")
        groups = page.locator("#groups tbody tr")
        expect(groups).to_have_count(3)
        expect(page.locator("#queue tbody tr")).to_have_count(1)  # bob's and carol's
        names = [row.get_attribute("data-group") for row in groups.all()]
        assert names == ["(dave)", "course-a", "course-b"]
        expect(page.locator("#groups tr[data-group=course-a]")).to_contain_text("alice, bob")
        expect(page.locator("#groups tr[data-group=course-a] td").nth(3)).to_have_text("50.0%")
        usage = page.locator("#groups tr[data-group=course-b] td").nth(4).text_content()
        assert usage is not None and float(usage) >= 6.0
        submitters = page.locator("#shares tbody tr")
        order = [row.get_attribute("data-submitter") for row in submitters.all()]
        assert order == ["dave", "bob", "alice", "carol"]
        expect(page.locator("#shares tr[data-submitter=bob] td").nth(1)).to_have_text("course-a")
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (width_name, overflow)
        screens.take(page, f"queue-groups-{width_name}")
        context.close()
