"""Issue 19 probe: an agent SIGKILLed mid-job takes its job's processes with it, so the
requeued job's second run never overlaps the first.

Before the fix the command kept running in its own session; the lease sent the job to
another worker and the marker file showed start, start, end, end.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.live_server import LiveServer
from tests.support.agent_probes import (
    Agents,
    alive,
    call,
    history,
    marker_job,
    register,
    runs,
    wait_for,
)


def test_killed_agent_leaves_no_run_behind_and_the_job_runs_once_more_elsewhere(
    short_lease_server: LiveServer, agents: Agents, tmp_path: Path
) -> None:
    server = short_lease_server
    first = agents.start("first", register(server, "first"))
    marker = tmp_path / "marker"
    job = call(server, "POST", "/v1/jobs", marker_job(marker, first_run_seconds=30))
    wait_for(lambda: runs(marker), what="the first run's start")
    ((_start, first_pid, _at),) = runs(marker)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # The work is a grandchild of the agent: the shim's parent-death signal takes it.
    wait_for(lambda: not alive(first_pid), timeout=5, what="the first run's death")
    assert call(server, "GET", f"/v1/jobs/{job['id']}")["state"] == "running"  # lease not over

    agents.start("second", register(server, "second"))
    done = wait_for(
        lambda: (j := call(server, "GET", f"/v1/jobs/{job['id']}"))["state"] == "finished" and j,
        timeout=60,
        what="the second run's end",
    )
    assert done["worker"] == "second"
    lines = runs(marker)
    assert [kind for kind, _pid, _at in lines] == ["start", "start", "end"]
    assert lines[0][1] == first_pid and lines[1][1] == lines[2][1] != first_pid
    kinds = [(e["kind"], e["worker"]) for e in history(server, job["id"])]
    assert kinds == [
        ("submitted", None),
        ("dispatched", "first"),
        ("requeued", "first"),
        ("dispatched", "second"),
        ("finished", "second"),
    ]
