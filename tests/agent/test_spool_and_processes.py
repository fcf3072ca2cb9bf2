"""Issue 19, the agent's parts without a server: a job's process group and what is left
of it, the spool, and outcomes kept until the server has them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx2

from app.agent import processes
from app.agent.execution import NO_COMMAND, OutputStream, job_environment
from app.agent.runner import Agent, AgentOptions
from app.agent.spool import Spool, SpoolEntry
from app.client import NO_RETRIES, WorkerClient
from app.client.models import Job, JobState
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


def _job(job_id: int, command: list[str] | None) -> Job:
    return Job(
        id=job_id, state=JobState.RUNNING, priority=0, slots=1, category_id=1, resources="",
        constraint=None, constraint_syntax=None, shape=None, jobspec=None, task=None,
        command=command, timeout=None, hard=None, soft=None, pe=None, pe_slots=None,
        submitter="admin", worker="w", failure_reason=None, attempts=1, exit_code=None,
        output=None, submitted_at="2026-11-25T00:00:00Z", started_at=None, ended_at=None,
    )  # fmt: skip


class _FlakyServer:
    """Refuses connections until ``up`` is set; then answers finish with the job."""

    def __init__(self) -> None:
        self.up = False
        self.sent: list[tuple[str, str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.path, body))
        if not self.up:
            raise httpx2.ConnectError("connection refused", request=request)
        if request.url.path.endswith("/output"):
            return httpx2.Response(200, json={"job": 5, "next_offset": 0})
        finished = asdict(_job(5, None)) | {"state": "finished", "exit_code": 0}
        return httpx2.Response(200, json=finished)


def test_an_unreported_outcome_stays_in_the_spool_and_is_sent_again(tmp_path: Path) -> None:
    server = _FlakyServer()
    client = WorkerClient(
        "http://jobmatch.invalid", "t", "w", transport=httpx2.MockTransport(server.handle),
        retry=NO_RETRIES,
    )  # fmt: skip
    options = AgentOptions(name="w", spool=tmp_path / "spool", work_dir=tmp_path / "work")
    agent = Agent(client, options)
    outcome = agent.run_job(_job(5, [sys.executable, "-c", "print('hi')"]))
    assert outcome.kind == "finished"
    (kept,) = Spool(tmp_path / "spool").entries()
    assert kept.job == 5 and kept.outcome is not None and kept.outcome["kind"] == "finished"
    assert not agent._resend_pending()  # still down: kept
    assert len(Spool(tmp_path / "spool").entries()) == 1
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


def test_a_job_without_a_command_fails_with_the_reason(tmp_path: Path) -> None:
    """Issue 22: a job with no command is refused, not reported finished."""
    client = WorkerClient("http://jobmatch.invalid", "t", "w", retry=NO_RETRIES)
    agent = Agent(client, AgentOptions(name="w", work_dir=tmp_path / "work"))
    outcome = agent.run_job(_job(6, None))
    assert (outcome.kind, outcome.reason) == ("failed", NO_COMMAND)


def test_a_jobs_environment_is_an_allow_list_without_the_token() -> None:
    source = {
        "PATH": "/usr/bin",
        "HOME": "agent-home",
        "LANG": "C.UTF-8",
        "JOBMATCH_WORKER_TOKEN": "jm_secret",
        "AWS_SECRET_ACCESS_KEY": "other secret",
        "CARRIES_IT": "Bearer jm_secret",
        "CC": "gcc",
    }
    passed = ("CC", "CARRIES_IT", "JOBMATCH_WORKER_TOKEN")
    env = job_environment(_job(7, ["true"]), "w", source, passed, secret="jm_secret")
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "agent-home",
        "LANG": "C.UTF-8",
        "CC": "gcc",
        "JOBMATCH_JOB_ID": "7",
        "JOBMATCH_WORKER": "w",
        "JOBMATCH_JOB_SLOTS": "1",
        "JOBMATCH_JOB_ATTEMPT": "1",
    }


def test_a_task_of_an_array_job_gets_its_task_id_and_range() -> None:
    """qsub(1) of Grid Engine 6.2u5: each task of an array job sees its index in
    SGE_TASK_ID and the array's range in SGE_TASK_FIRST, SGE_TASK_LAST and
    SGE_TASK_STEPSIZE; jobmatch adds JOBMATCH_TASK_ID. A job that is no task gets none."""
    task = replace(_job(7, ["true"]), array_id=3, task_id=5, task_range="1-9:2")
    env = job_environment(task, "w", {"PATH": "/usr/bin"})
    assert {k: v for k, v in env.items() if "TASK" in k} == {
        "JOBMATCH_TASK_ID": "5",
        "SGE_TASK_ID": "5",
        "SGE_TASK_FIRST": "1",
        "SGE_TASK_LAST": "9",
        "SGE_TASK_STEPSIZE": "2",
    }
    plain = job_environment(_job(7, ["true"]), "w", {"PATH": "/usr/bin"})
    assert not [name for name in plain if "TASK" in name]


def test_output_offsets_stay_absolute_when_unsent_text_is_dropped() -> None:
    stream = OutputStream(tail_chars=4, pending_limit=6)
    stream.add("abc")
    assert stream.pending() == (0, "abc")
    stream.acknowledge(3)
    stream.add("defghij\x00")
    assert stream.pending() == (5, "fghij\ufffd")  # 2 characters dropped, never sent
    assert stream.tail() == "hij\ufffd"
