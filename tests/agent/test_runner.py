"""Issue 22, the agent's conversation with the server, against a scripted transport: what
it reports before its first pull, how it pulls, how it stops on a refusal, how it backs
off; and the Grid Engine load values it reports."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import httpx2
import pytest

from app.agent.load import load_values
from app.agent.runner import Agent, AgentOptions, Backoff, WorkerRefused
from app.client import NO_RETRIES, WorkerClient

METADATA = {
    "worker": "w",
    "generation": 1,
    "static": {},
    "dynamic": {},
    "effective": {},
    "namespaces": {},
    "reported_at": None,
    "refresh_metadata": False,
}


#: A running job as the server answers a pull with it (app.client.models.Job's fields).
JOB = {
    "id": 1, "state": "running", "priority": 0, "slots": 1, "category_id": 1, "resources": "",
    "constraint": None, "constraint_syntax": None, "shape": None, "jobspec": None, "task": None,
    "command": ["true"], "timeout": None, "hard": None, "soft": None, "pe": None,
    "pe_slots": None, "submitter": "admin", "worker": "w", "failure_reason": None,
    "attempts": 1, "exit_code": None, "output": None, "submitted_at": "2026-11-25T00:00:00Z",
    "started_at": None, "ended_at": None,
}  # fmt: skip


def batch(*jobs: dict[str, object], finished: list[dict[str, object]] | None = None) -> dict:  # type: ignore[type-arg]
    """A batch pull's answer (app.client.models.PulledBatch's fields)."""
    return {"finished": finished or [], "jobs": list(jobs), "placed": []}


class ScriptedServer:
    """Answers the agent's calls; its first (batch) pull stops the agent, or is refused.

    A refused pull does not also stop the agent: the refusal must be what ends it. (Both
    at once raced: the agent's loop could see the stop before the answer, and rightly
    abandon the pull without reading it.)"""

    def __init__(self, pull_status: int = 204) -> None:
        self.calls: list[str] = []
        self.pull_status = pull_status
        self.agent: Agent | None = None

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        self.calls.append(f"{request.method} {path}")
        if path == "/v1/tasks":
            page = {"items": [], "limit": 500, "offset": 0, "next_offset": None}
            return httpx2.Response(200, json=page)
        if path.endswith("/metadata"):
            return httpx2.Response(200, json=METADATA)
        if path.endswith("/load"):
            return httpx2.Response(200, json={"static_changed": False})
        if path.endswith("/pull-batch"):
            assert request.url.params["wait"] == "5"
            if self.pull_status == 401:
                problem = {"title": "Unauthorized", "status": 401, "detail": "unknown token"}
                return httpx2.Response(401, json=problem)
            if self.agent is not None:
                self.agent.stop()
            return httpx2.Response(200, json=batch())
        return httpx2.Response(404, json={"title": "Not Found", "status": 404, "detail": path})


def _agent(server: ScriptedServer, tmp_path: Path) -> Agent:
    client = WorkerClient(
        "http://jm.test", "t", "w", retry=NO_RETRIES, transport=httpx2.MockTransport(server.handle)
    )
    options = AgentOptions(name="w", wait=5, poll_interval=0.01, work_dir=tmp_path / "work")
    agent = Agent(client, options)
    server.agent = agent
    return agent


def test_metadata_and_load_are_reported_before_the_first_pull(tmp_path: Path) -> None:
    """debusine issue #8: a (re)started worker reports its metadata before it pulls, so a
    task job submitted right after it starts finds it suitable."""
    server = ScriptedServer()
    assert _agent(server, tmp_path).run() == 0
    assert server.calls == [
        "GET /v1/tasks",
        "POST /v1/workers/w/metadata",
        "PUT /v1/workers/w/load",
        "POST /v1/workers/w/pull-batch",
    ]


def test_a_401_on_pull_stops_the_agent_with_what_to_check(tmp_path: Path) -> None:
    server = ScriptedServer(pull_status=401)
    with pytest.raises(WorkerRefused, match="JOBMATCH_WORKER_TOKEN"):
        _agent(server, tmp_path).run()
    assert server.calls.count("POST /v1/workers/w/pull-batch") == 1  # not retried


def test_a_job_a_pull_brings_after_the_stop_is_given_back(tmp_path: Path) -> None:
    """A stop does not wait for a long-poll to end; the job that pull still brings is
    returned to the queue at once instead of run."""
    server = ScriptedServer()
    pulled, release = threading.Event(), threading.Event()
    job = {**JOB, "id": 9}

    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/pull-batch"):
            server.calls.append("POST /v1/workers/w/pull-batch")
            pulled.set()
            release.wait(10)
            return httpx2.Response(200, json=batch(job))
        if request.url.path.endswith("/return"):
            server.calls.append("POST /v1/jobs/9/return")
            return httpx2.Response(200, json={**job, "state": "waiting"})
        return server.handle(request)

    client = WorkerClient(
        "http://jm.test", "t", "w", retry=NO_RETRIES, transport=httpx2.MockTransport(handle)
    )
    agent = Agent(client, AgentOptions(name="w", wait=5, work_dir=tmp_path / "work"))
    runner = threading.Thread(target=agent.run)
    runner.start()
    assert pulled.wait(10)
    agent.stop()
    release.set()
    runner.join(30)
    assert not runner.is_alive()
    assert server.calls[-2:] == ["POST /v1/workers/w/pull-batch", "POST /v1/jobs/9/return"]


def test_a_superseded_pull_is_warned_about_and_backed_off_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 37: a 204 marked Jobmatch-Superseded means a newer pull under this worker's
    name waits (another agent with the same name, say): the agent says so and backs off,
    longer each time, instead of taking the place back at once."""
    server = ScriptedServer()
    pulls: list[float] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/pull-batch"):
            pulls.append(time.monotonic())
            if len(pulls) == 3 and server.agent is not None:
                server.agent.stop()
            return httpx2.Response(200, json=batch(), headers={"Jobmatch-Superseded": "true"})
        return server.handle(request)

    client = WorkerClient(
        "http://jm.test", "t", "w", retry=NO_RETRIES, transport=httpx2.MockTransport(handle)
    )
    options = AgentOptions(
        name="w", wait=5, work_dir=tmp_path / "work", backoff_initial=0.2, backoff_max=5
    )
    agent = Agent(client, options)
    server.agent = agent
    with caplog.at_level(logging.WARNING, logger="jobmatch.agent"):
        assert agent.run() == 0
    assert len(pulls) == 3
    assert pulls[1] - pulls[0] >= 0.1  # backed off (jitter keeps at least half)
    assert "is another agent running with this name and token?" in caplog.text


@pytest.mark.parametrize("slots", [1, 3])
def test_the_next_batch_pull_carries_the_end_of_the_job_and_asks_for_every_free_slot(
    tmp_path: Path, slots: int
) -> None:
    """Issue 38: a worker asks for a job for each free slot at once; the end of a job
    that ended while no pull was on its way goes with the next pull, not as a finish of
    its own (with one slot, the job's end is what frees the slot for the next pull)."""
    server = ScriptedServer()
    bodies: list[tuple[str, str | None, dict[str, object]]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path.endswith("/pull-batch"):
            server.calls.append(f"POST {path}")
            body = json.loads(request.content)
            bodies.append((request.url.params["max"], request.url.params.get("wait"), body))
            if len(bodies) == 1:
                return httpx2.Response(200, json=batch({**JOB, "id": 7}))
            ended = [
                {"job_id": report["job_id"], "state": "finished", "late": False}
                for report in body["finished"]
            ]
            if server.agent is not None:
                server.agent.stop()
            return httpx2.Response(200, json=batch(finished=ended))
        return server.handle(request)

    client = WorkerClient(
        "http://jm.test", "t", "w", retry=NO_RETRIES, transport=httpx2.MockTransport(handle)
    )
    options = AgentOptions(name="w", slots=slots, wait=5, work_dir=tmp_path / "work")
    agent = Agent(client, options)
    server.agent = agent
    assert agent.run() == 0
    assert bodies[0] == (str(slots), "5", {"finished": []})
    if slots == 1:
        # The pull that carries the end does not wait: its answer acknowledges it at once.
        report = {"job_id": 7, "outcome": "finished", "exit_code": 0, "output": ""}
        assert bodies[1:] == [("1", None, {"finished": [report]})]
        assert not any(call.endswith("/finish") for call in server.calls)


def test_a_server_without_batch_pulls_gets_single_pulls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An older server answers the batch pull 404: the agent says so once and pulls one
    job at a time, as before."""
    server = ScriptedServer()

    def handle(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path.endswith("/pull"):
            server.calls.append(f"POST {path}")
            if server.agent is not None:
                server.agent.stop()
            return httpx2.Response(204)
        return (
            server.handle(request)
            if not path.endswith("/pull-batch")
            else _not_found(server, request)
        )

    client = WorkerClient(
        "http://jm.test", "t", "w", retry=NO_RETRIES, transport=httpx2.MockTransport(handle)
    )
    agent = Agent(
        client, AgentOptions(name="w", wait=5, poll_interval=0.01, work_dir=tmp_path / "work")
    )
    server.agent = agent
    with caplog.at_level(logging.WARNING, logger="jobmatch.agent"):
        assert agent.run() == 0
    assert server.calls[-2:] == ["POST /v1/workers/w/pull-batch", "POST /v1/workers/w/pull"]
    assert "the server has no batch pull" in caplog.text


def _not_found(server: ScriptedServer, request: httpx2.Request) -> httpx2.Response:
    server.calls.append(f"{request.method} {request.url.path}")
    return httpx2.Response(404, json={"title": "Not Found", "status": 404, "detail": "Not Found"})


def test_backoff_doubles_with_jitter_up_to_its_ceiling() -> None:
    backoff = Backoff(1.0, 8.0, threading.Event())
    delays = [backoff.next_delay() for _ in range(6)]
    ceilings = [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True)), delays
    backoff.reset()
    assert backoff.next_delay() <= 1.0


def test_load_values_use_grid_engine_names_and_units(tmp_path: Path) -> None:
    """complex(5) host load values as Son of Grid Engine 8.1.9's execd forms them
    (source/daemons/execd/load_avg.c, sge_get_loadavg()): load_avg is the 5-minute
    average, np_* divided by num_proc, all as %f; memory in MiB as %fM, free memory
    counting Buffers and Cached (source/libs/uti/sge_loadmem.c, sge_loadmem());
    /proc/meminfo counts kB."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal: 1024000 kB\nMemFree: 102400 kB\nMemAvailable: 409600 kB\n"
        "Buffers: 51200 kB\nCached: 256000 kB\nSwapCached: 0 kB\n"
        "SwapTotal: 204800 kB\nSwapFree: 51200 kB\n"
    )
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("3.00 1.50 0.75 2/345 6789\n")
    values = load_values(meminfo, loadavg)
    processors = int(values["num_proc"])
    assert (values["load_avg"], values["load_short"]) == ("1.500000", "3.000000")
    assert values["load_avg"] == values["load_medium"]
    assert values["np_load_avg"] == f"{1.5 / processors:f}"
    assert (values["mem_total"], values["mem_free"], values["mem_used"]) == (
        "1000.000000M",
        "400.000000M",
        "600.000000M",
    )
    assert (values["swap_used"], values["virtual_free"]) == ("150.000000M", "450.000000M")
    assert "mem_free" not in load_values(tmp_path / "absent", loadavg)
