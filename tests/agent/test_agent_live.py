"""Issue 22: `jobmatch-agent` against a real `jobmatch serve` on loopback, on both databases:
the server down at start and killed mid-job, the agent killed mid-job, slots, streamed
output, the job's environment, jobs without a command, a refused token, load values."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.agent.execution import NO_COMMAND
from app.db.engine import Database
from tests.live_server import LiveServer
from tests.support.agent_probes import alive, call, history, wait_for

AGENT = str(Path(sys.executable).with_name("jobmatch-agent"))
PY = sys.executable
#: Leases of the live server: long enough for a heartbeat, short enough to wait out.
LEASE_SECONDS = 3


class AgentProcesses:
    """`jobmatch-agent` processes with fast intervals, logging to the test's directory;
    whatever still runs at the end is killed."""

    def __init__(self, server: LiveServer, directory: Path) -> None:
        self.server = server
        self.directory = directory
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, token: str, *extra: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "JOBMATCH_WORKER_TOKEN": token}
        env["JOBMATCH_AGENT_SPOOL"] = str(self.directory / f"spool-{name}")
        # A long-poll under the 3 s lease: a worker waiting in a pull sends nothing, so a
        # wait longer than the lease lets it fall silent (deployments: 30 s against 300 s).
        command = [AGENT, "--server", self.server.base_url, "--name", name, "--wait", "1"]
        command += ["--poll-interval", "0.2", "--heartbeat-interval", "0.5"]
        command += ["--output-interval", "0.2", "--backoff-max", "0.5", *extra]
        with self.log(name).open("ab") as log:
            agent = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        self.started.append(agent)
        return agent

    def log(self, name: str) -> Path:
        return self.directory / f"agent-{name}.log"

    def stop_all(self) -> None:
        for agent in self.started:
            if agent.poll() is None:
                agent.send_signal(signal.SIGKILL)
            agent.wait(timeout=10)


@pytest.fixture
def server(database_url: str, database: Database, tmp_path: Path) -> Iterator[LiveServer]:
    """A live server with short leases, swept every 0.2 s (not started: a test may want
    its agent first)."""
    env = {"JOBMATCH_LEASE_SECONDS": str(LEASE_SECONDS), "JOBMATCH_LEASE_SWEEP_SECONDS": "0.2"}
    live = LiveServer(database_url, tmp_path / "server.log", env=env)
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def agents(server: LiveServer, tmp_path: Path) -> Iterator[AgentProcesses]:
    started = AgentProcesses(server, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


def _register(server: LiveServer, name: str, slots: int = 1) -> str:
    token: str = call(server, "POST", "/v1/workers", {"name": name, "slots": slots})["token"]
    return token


def _submit(server: LiveServer, **job: Any) -> int:
    job_id: int = call(server, "POST", "/v1/jobs", job)["id"]
    return job_id


def _job(server: LiveServer, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = call(server, "GET", f"/v1/jobs/{job_id}")
    return found


def _ended(server: LiveServer, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        lambda: (job := _job(server, job_id))["state"] in ("finished", "failed") and job,
        timeout=60,
        what=f"the end of job {job_id}",
    )
    return found


def _script(text: str) -> list[str]:
    return [PY, "-c", text]


def _waits_for(path: Path, before: str = "") -> list[str]:
    """A command that prints ``before``, then waits until ``path`` exists (the test says
    when the job may end: no timing decides)."""
    return _script(
        f"import os, time; print({before!r}, flush=True)\n"
        f"while not os.path.exists({str(path)!r}): time.sleep(0.05)"
    )


def test_server_down_at_start_then_up(server: LiveServer, agents: AgentProcesses) -> None:
    server.start()
    token = _register(server, "w1")
    server.stop()
    agent = agents.start("w1", token)
    unreachable = "cannot reach the jobmatch server"
    wait_for(lambda: unreachable in agents.log("w1").read_text(), what="a failed try")
    assert agent.poll() is None, "the agent gave up while the server was down"
    server.start()
    job = _submit(server, command=_script("print('after the outage')"))
    done = _ended(server, job)
    assert (done["state"], done["worker"]) == ("finished", "w1")
    assert "after the outage" in done["output"]


def test_server_killed_mid_job_gets_the_result_once(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    server.start()
    token = _register(server, "w1")
    agents.start("w1", token)
    release = tmp_path / "release"
    job = _submit(server, command=_waits_for(release, "working"))
    wait_for(lambda: _job(server, job)["state"] == "running", what="the job running")
    server.kill()
    release.touch()  # the job ends while the server is down: its finish cannot be sent
    spooled = tmp_path / "spool-w1" / f"job-{job}.json"
    wait_for(
        lambda: spooled.exists() and json.loads(spooled.read_text())["outcome"] is not None,
        what="the outcome in the spool",
    )
    server.start()
    done = _ended(server, job)
    assert (done["state"], done["exit_code"]) == ("finished", 0)
    kinds = [event["kind"] for event in history(server, job)]
    assert kinds.count("finished") == 1 and kinds.count("dispatched") == 1, history(server, job)
    wait_for(lambda: not spooled.exists(), what="the spool to forget the reported job")


#: Appends the worker running it to the file named by its argument; the first run (on w1)
#: then sleeps until it is killed, the second (on w2) ends at once.
_RECORDS_ITS_WORKER = (
    "import os, sys, time\nworker = os.environ['JOBMATCH_WORKER']\n"
    "open(sys.argv[1], 'a').write(worker + '\\n')\n"
    "time.sleep(0 if worker == 'w2' else 600)"
)


def test_agent_killed_mid_job_is_requeued_after_the_lease_and_runs_again(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    server.start()
    first = agents.start("w1", _register(server, "w1"))
    marker = tmp_path / "runs"
    job = _submit(
        server,
        command=[*_script(_RECORDS_ITS_WORKER), str(marker)],
    )
    wait_for(lambda: marker.exists() and "w1" in marker.read_text(), what="the first run")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    wait_for(
        lambda: "requeued" in [event["kind"] for event in history(server, job)],
        timeout=30,
        what="the requeue after the lease",
    )
    agents.start("w2", _register(server, "w2"))
    done = _ended(server, job)
    assert (done["state"], done["worker"], done["attempts"]) == ("finished", "w2", 2)
    assert marker.read_text().split() == ["w1", "w2"]


def test_four_slots_run_four_jobs_at_once(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    server.start()
    agents.start("w4", _register(server, "w4", slots=4), "--slots", "4")
    release = tmp_path / "release"
    jobs = [_submit(server, command=_waits_for(release)) for _ in range(4)]

    def all_running() -> bool:
        return all(_job(server, job)["state"] == "running" for job in jobs)

    wait_for(all_running, timeout=60, what="four jobs running at once")
    release.touch()
    assert all(_ended(server, job)["state"] == "finished" for job in jobs)


def test_output_is_readable_while_the_job_runs(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    server.start()
    agents.start("w1", _register(server, "w1"))
    release = tmp_path / "release"
    job = _submit(server, command=_waits_for(release, "first line"))

    def streamed() -> dict[str, Any] | None:
        read: dict[str, Any] = call(server, "GET", f"/v1/jobs/{job}/output")
        return read if "first line" in read["text"] else None

    read = wait_for(streamed, what="the first line on the server")
    assert _job(server, job)["state"] == "running"
    assert read["offset"] == 0 and read["next_offset"] == len(read["text"])
    later = call(server, "GET", f"/v1/jobs/{job}/output?offset={read['next_offset']}")
    assert later["text"] == ""
    release.touch()
    assert "first line" in _ended(server, job)["output"]


def test_the_jobs_environment_holds_no_token_and_its_own_directory(
    server: LiveServer, agents: AgentProcesses
) -> None:
    server.start()
    token = _register(server, "w1")
    agents.start("w1", token)
    job = _submit(
        server,
        command=_script(
            "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
        ),
    )
    done = _ended(server, job)
    assert token not in done["output"]
    seen = json.loads(done["output"])
    assert "JOBMATCH_WORKER_TOKEN" not in seen["env"]
    assert seen["env"]["JOBMATCH_JOB_ID"] == str(job)
    assert Path(seen["cwd"]).name == f"job-{job}"


def test_a_job_without_a_command_fails_with_the_reason(
    server: LiveServer, agents: AgentProcesses
) -> None:
    server.start()
    agents.start("w1", _register(server, "w1"))
    job = _submit(server, resources="")
    done = _ended(server, job)
    assert (done["state"], done["failure_reason"]) == ("failed", NO_COMMAND)


def test_a_refused_token_stops_the_agent_with_a_message(
    server: LiveServer, agents: AgentProcesses
) -> None:
    server.start()
    _register(server, "w1")
    agent = agents.start("w1", "not-a-token")
    assert agent.wait(timeout=60) == 3
    log = agents.log("w1").read_text()
    assert "the server refused this worker" in log and "JOBMATCH_WORKER_TOKEN" in log
    assert "Traceback" not in log


def test_load_values_are_reported_and_requests_see_them(
    server: LiveServer, agents: AgentProcesses
) -> None:
    """complex(5): num_proc is a host load value (relop ==); a job asking for this host's
    processor count runs, one asking for one more waits."""
    server.start()
    agents.start("w1", _register(server, "w1"))
    processors = os.cpu_count() or 1
    fits = _submit(server, hard=f"num_proc={processors}", command=_script("pass"))
    assert _ended(server, fits)["state"] == "finished"
    too_many = _submit(server, hard=f"num_proc={processors + 1}", command=_script("pass"))
    assert _job(server, too_many)["state"] == "waiting"


def test_a_cancelled_job_is_killed_whole(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    """The agent learns of the cancel when the server refuses the job's output (409) and
    kills the job's process group, the command's children included."""
    server.start()
    agents.start("w1", _register(server, "w1"))
    pids = tmp_path / "pids"
    job = _submit(server, command=[*_script(_LEAVES_A_CHILD), str(pids)])
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="both pids")
    call(server, "POST", f"/v1/jobs/{job}/cancel")
    for pid in (int(p) for p in pids.read_text().split()):
        wait_for(lambda pid=pid: not alive(pid), what=f"the end of process {pid}")
    assert _job(server, job)["state"] == "cancelled"


#: Writes its own pid and its child's to the file named by its argument, then sleeps.
_LEAVES_A_CHILD = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}')\n"
    "time.sleep(600)"
)


def test_sigterm_drains_every_slot_and_logs_json_lines(
    server: LiveServer, agents: AgentProcesses, tmp_path: Path
) -> None:
    """On SIGTERM the agent pulls no more; of its two running jobs the short one finishes,
    the one that outlives the grace period is returned to the queue; it exits 0."""
    server.start()
    agent = agents.start("w2", _register(server, "w2", slots=2), "--slots", "2", "--grace", "3")
    release = tmp_path / "release"
    short = _submit(server, command=_waits_for(release, "short"))
    long = _submit(
        server, command=_script("import time; print('long', flush=True); time.sleep(600)")
    )

    def printed(job: int, text: str) -> bool:
        return text in call(server, "GET", f"/v1/jobs/{job}/output")["text"]

    # Both commands run (their first lines reached the server): running on the server is
    # not enough, since one batch pull brings both, and a stop before the agent starts
    # them gives them back.
    wait_for(
        lambda: printed(short, "short") and printed(long, "long"), what="both commands running"
    )
    agent.send_signal(signal.SIGTERM)
    release.touch()
    assert agent.wait(timeout=60) == 0
    assert _job(server, short)["state"] == "finished"
    returned = _job(server, long)
    assert (returned["state"], returned["worker"]) == ("waiting", None)
    assert "returned" in [event["kind"] for event in history(server, long)]
    lines = [line for line in agents.log("w2").read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    assert any(record["message"].startswith("stopping") for record in records)


def _waiting_pulls(server: LiveServer) -> float:
    """The server's count of pulls waiting for work, from /metrics."""
    status, text = server.request("GET", "/metrics", token="")
    assert status == 200
    found = re.search(r"^jobmatch_longpoll_waiting (\S+)$", text, re.M)
    assert found is not None, text
    return float(found.group(1))


#: With --wait 30, an idle agent that waited out its pull took up to 30 s to stop; one
#: that cancels it takes a fraction of a second. The bound is far from both.
STOP_BOUND_SECONDS = 5.0


def test_an_idle_agent_stops_at_once_on_sigterm(server: LiveServer, agents: AgentProcesses) -> None:
    server.start()
    agent = agents.start("w1", _register(server, "w1"), "--wait", "30")
    wait_for(lambda: _waiting_pulls(server) == 1, what="the agent's pull waiting on the server")
    told = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    code = agent.wait(timeout=60)
    took = time.monotonic() - told
    assert code == 0, agents.log("w1").read_text()
    assert took < STOP_BOUND_SECONDS, f"the agent took {took:.1f} s to stop"
    # The server saw the pull's connection end: it waits no more, and takes no job for it.
    wait_for(lambda: _waiting_pulls(server) == 0, what="the server to end the pull")
    job = _submit(server, command=_script("print(1)"))
    assert _job(server, job)["state"] == "waiting"


def test_the_agent_reads_jobmatch_url_and_warns_of_jobmatch_server(
    server: LiveServer, tmp_path: Path
) -> None:
    server.start()
    token = _register(server, "w1")
    base = {k: v for k, v in os.environ.items() if not k.startswith("JOBMATCH_")}
    common = [AGENT, "--name", "w1", "--max-jobs", "1", "--wait", "1", "--log-format", "text"]
    for variables, warning in (
        ({"JOBMATCH_URL": server.base_url}, None),
        (
            {"JOBMATCH_SERVER": server.base_url},
            "warning: JOBMATCH_SERVER is deprecated: set JOBMATCH_URL instead",
        ),
        (
            {"JOBMATCH_URL": server.base_url, "JOBMATCH_SERVER": "http://127.0.0.1:1"},
            "warning: JOBMATCH_SERVER is deprecated and ignored: JOBMATCH_URL is set too, "
            f"and wins ({server.base_url})",
        ),
    ):
        job = _submit(server, command=_script("print('ran')"))
        env = {**base, **variables, "JOBMATCH_WORKER_TOKEN": token}
        env["JOBMATCH_AGENT_SPOOL"] = str(tmp_path / "spool")
        ran = subprocess.run(common, env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        assert _job(server, job)["state"] == "finished"
        first = ran.stderr.splitlines()[0]
        if warning is None:
            assert "warning" not in ran.stderr
        else:
            assert first == warning


def test_the_log_has_no_request_lines_and_one_line_per_retry(
    server: LiveServer, agents: AgentProcesses
) -> None:
    server.start()
    token = _register(server, "w1")
    server.stop()
    agent = agents.start("w1", token, "--log-format", "text")
    retried = re.compile(
        r"WARNING \[-\] jobmatch\.agent: GET /v1/tasks failed \(cannot reach the jobmatch "
        r"server at http://127\.0\.0\.1:\d+: .+\); attempt 2 of 2 in \d+\.\d s$",
        re.M,
    )
    wait_for(lambda: retried.search(agents.log("w1").read_text()), what="a retry's line")
    server.start()
    job = _submit(server, command=_script("print('after')"))
    assert _ended(server, job)["state"] == "finished"
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=60)
    log = agents.log("w1").read_text()
    assert "HTTP Request" not in log and "httpx" not in log and "httpcore" not in log, log
    assert "stamina" not in log, log
