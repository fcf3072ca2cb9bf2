"""Issue 19, the agent's parts without a server: a job's process group and what is left
of it, the spool, and outcomes kept until the server has them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.agent import processes
from app.agent.client import ApiError, Reply
from app.agent.runner import Agent, AgentOptions
from app.agent.spool import Spool, SpoolEntry
from tests.support.agent_probes import alive, wait_for

#: A command whose child outlives it in the same process group (a job's stray daemon).
_LEAVES_A_CHILD = (
    "import subprocess, sys, time;"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
    "print(p.pid, flush=True); time.sleep(60)"
)


def _wait_dead(pid: int) -> bool:
    return bool(wait_for(lambda: not alive(pid), timeout=10, what=f"the death of {pid}"))


def test_a_job_leads_its_own_group_and_what_is_left_of_it_can_be_killed() -> None:
    job = processes.start_job([sys.executable, "-c", _LEAVES_A_CHILD])
    try:
        assert job.popen.stdout is not None
        child = int(job.popen.stdout.readline())
        assert os.getpgid(job.pgid) == job.pgid  # the shim leads the group
        members = processes.group_members(job.pgid)
        assert {job.pgid, child} <= set(members)
        assert job.started == members[job.pgid]
        # Another start time: the group is someone else's (a reused id), left alone.
        assert processes.kill_group_left(job.pgid, (job.started or 0) + 1) == []
        assert alive(child)
        killed = processes.kill_group_left(job.pgid, job.started)
        assert child in killed and _wait_dead(child)
    finally:
        processes.signal_group(job, signal.SIGKILL)
        job.popen.wait(timeout=10)


def test_killing_the_agent_takes_the_jobs_grandchildren_with_it() -> None:
    """Linux prctl(2) PR_SET_PDEATHSIG: the kernel tells the shim its agent died (here a
    stand-in agent, SIGKILLed) and the shim kills its group, the command's child too."""
    stand_in = (
        "import sys; from app.agent import processes;"
        f"job = processes.start_job([sys.executable, '-c', {_LEAVES_A_CHILD!r}]);"
        "print(job.pgid, job.popen.stdout.readline().decode().strip(), flush=True);"
        "import time; time.sleep(60)"
    )
    agent = subprocess.Popen([sys.executable, "-c", stand_in], stdout=subprocess.PIPE)
    assert agent.stdout is not None
    shim, child = (int(pid) for pid in agent.stdout.readline().split())
    assert alive(shim) and alive(child)
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    assert _wait_dead(shim) and _wait_dead(child)


def test_spool_keeps_whole_entries_and_ignores_strangers(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    spool.write(SpoolEntry(7))
    spool.write(SpoolEntry(3, pgid=123, started=456, boot="b"))
    (tmp_path / "spool" / "job-9.json").write_text("{half")  # torn by hand: skipped
    (tmp_path / "spool" / "notes.txt").write_text("not ours")
    assert [e.job for e in spool.entries()] == [3, 7]
    assert spool.entries()[0] == SpoolEntry(3, pgid=123, started=456, boot="b")
    spool.remove(3)
    assert [e.job for e in spool.entries()] == [7]


class _FlakyServer:
    """Answers every finish with "unreachable" until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        self.sent.append((method, path, body))
        if not self.up:
            raise ApiError(0, "cannot reach the server")
        return Reply(200, {}, {})


def test_an_unreported_outcome_stays_in_the_spool_and_is_sent_again(tmp_path: Path) -> None:
    server = _FlakyServer()
    options = AgentOptions(name="w", spool=tmp_path / "spool")
    agent = Agent(server, options)  # type: ignore[arg-type]
    outcome = agent.run_job({"id": 5, "command": [sys.executable, "-c", "print('hi')"]})
    assert outcome.kind == "finished"
    (kept,) = Spool(tmp_path / "spool").entries()
    assert kept.job == 5 and kept.outcome is not None and kept.outcome["kind"] == "finished"
    server.up = True
    assert agent._resend_pending()
    method, path, body = server.sent[-1]
    assert (method, path, body["outcome"], body["exit_code"]) == (
        "POST",
        "/v1/jobs/5/finish",
        "finished",
        0,
    )
    assert "hi" in body["output"]
    assert Spool(tmp_path / "spool").entries() == []
