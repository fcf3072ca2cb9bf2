"""Issue 19 probe: an agent that restarts finds in its spool the job it left running,
kills what is left of it and gives it back, all before it pulls again.

The left-behind process is made the hard way: the agent is frozen (SIGSTOP), the job's
shim SIGKILLed (as the OOM killer might), then the agent SIGKILLed; the work, a grandchild,
has nobody left to take it down but the next life of the agent.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from app.agent.runner import RESTARTED
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

#: Long enough that the restarted agent, not the lease, gives the job back.
LEASE_SECONDS = 20


def test_restarted_agent_kills_its_leftover_and_returns_the_job_before_pulling(
    short_lease_server: LiveServer, agents: Agents, tmp_path: Path
) -> None:
    server = short_lease_server
    token = register(server, "w")
    agent = agents.start("w", token)
    marker = tmp_path / "marker"
    job = call(server, "POST", "/v1/jobs", marker_job(marker, first_run_seconds=60))
    wait_for(lambda: runs(marker), what="the first run's start")
    ((_start, work_pid, _at),) = runs(marker)
    shim = agents.spooled("w", job["id"])["pgid"]

    agent.send_signal(signal.SIGSTOP)
    os.kill(shim, signal.SIGKILL)
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    assert alive(work_pid)  # left behind: its shim died before it could act

    agents.start("w", token)
    wait_for(lambda: not alive(work_pid), timeout=15, what="the leftover's death")
    done = wait_for(
        lambda: (j := call(server, "GET", f"/v1/jobs/{job['id']}"))["state"] == "finished" and j,
        timeout=30,
        what="the second run's end",
    )
    assert done["attempts"] == 2
    events = [(e["kind"], e["worker"], e["detail"]) for e in history(server, job["id"])]
    kinds = [kind for kind, _worker, _detail in events]
    # Given back (not left to the lease) and only then dispatched again.
    assert kinds == ["submitted", "dispatched", "returned", "dispatched", "finished"]
    assert events[2] == ("returned", "w", RESTARTED)
    assert [kind for kind, _pid, _at in runs(marker)] == ["start", "start", "end"]
    # The server has every outcome, and the agent forgets a spooled job once the server's
    # answer reaches it: a moment after the commit that made the job "finished" above
    # (CI of stop 51 read the spool in that moment).
    wait_for(
        lambda: not list(agents.spool("w").glob("job-*.json")),
        timeout=10,
        what="the spool's last entry forgotten",
    )
