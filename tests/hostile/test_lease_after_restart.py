"""Issue 19 probes: the server's downtime is not its workers' silence, and a finish that
comes after the worker lost its job is explained, not refused with a bare 403.

Before the fix, after a 5 s restart the sweeper requeued the jobs of a live worker, handed
them to others and answered the first worker's finish with 403.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.live_server import LiveServer
from tests.support.agent_probes import Agents, call, history, marker_job, register, runs, wait_for

#: The lease of these probes; the server stays down for twice as long.
LEASE_SECONDS = 2


def test_live_workers_job_survives_a_server_restart_longer_than_the_lease(
    short_lease_server: LiveServer, agents: Agents, tmp_path: Path
) -> None:
    server = short_lease_server
    # Heartbeats every second: after the restart the sweeper must wait for them.
    agents.start("w", register(server, "w"), "--heartbeat-interval", "1")
    agents.start("other", register(server, "other"), "--heartbeat-interval", "1")
    marker = tmp_path / "marker"
    job = call(server, "POST", "/v1/jobs", marker_job(marker, first_run_seconds=12))
    wait_for(lambda: runs(marker), what="the run's start")
    holder = call(server, "GET", f"/v1/jobs/{job['id']}")["worker"]

    server.kill()
    time.sleep(2 * LEASE_SECONDS)  # every worker's last_seen is now older than a lease
    server.start()
    done = wait_for(
        lambda: (j := call(server, "GET", f"/v1/jobs/{job['id']}"))["state"] != "running" and j,
        timeout=60,
        what="the job's end",
    )
    assert (done["state"], done["worker"], done["attempts"]) == ("finished", holder, 1)
    kinds = [(e["kind"], e["worker"]) for e in history(server, job["id"])]
    assert kinds == [("submitted", None), ("dispatched", holder), ("finished", holder)]
    assert [kind for kind, _pid, _at in runs(marker)] == ["start", "end"]


def test_finish_after_requeue_is_recorded_and_answered_409_with_what_happened(
    short_lease_server: LiveServer,
) -> None:
    server = short_lease_server
    tokens = {name: register(server, name) for name in ("w", "v")}
    job = call(server, "POST", "/v1/jobs", {})
    assert call(server, "POST", "/v1/workers/w/pull", token=tokens["w"])["id"] == job["id"]
    # w goes silent; a lease after the server's start, the sweeper requeues the job.
    wait_for(
        lambda: call(server, "GET", f"/v1/jobs/{job['id']}")["state"] == "waiting",
        timeout=15,
        what="the requeue",
    )
    assert call(server, "POST", "/v1/workers/v/pull", token=tokens["v"])["id"] == job["id"]

    status, problem = server.request(
        "POST", f"/v1/jobs/{job['id']}/finish", {"outcome": "finished"}, tokens["w"]
    )
    assert status == 409
    assert problem["type"] == "urn:jobmatch:problem:late-report"
    assert (problem["state"], problem["worker"]) == ("running", "v")
    assert problem["lost_at"] and "lease expired" in problem["detail"]
    events = history(server, job["id"])
    assert [e["kind"] for e in events][-3:] == ["requeued", "dispatched", "late_report"]
    assert events[-1]["worker"] == "w"
    assert call(server, "GET", f"/v1/jobs/{job['id']}")["state"] == "running"  # not applied
    # A worker that never held the job is still simply refused.
    stranger = register(server, "stranger")
    status, _problem = server.request(
        "POST", f"/v1/jobs/{job['id']}/finish", {"outcome": "finished"}, stranger
    )
    assert status == 403
