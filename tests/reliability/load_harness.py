"""A concurrent load on a real `jobmatch serve`, and the checks made afterwards (issue 8).

Shared by tests/reliability/test_load_invariants.py (small, in CI) and bench/load.py (the
figures: 20,000 jobs, 32 client processes). The cluster is a Grid Engine one, so that the
pulls contend for more than slots: a global licence pool (a per-job consumable), a memory
consumable per host (per slot) and a parallel environment with a slot limit of its own.

Every client acts as one worker over loopback HTTP: it pulls, holds a few jobs so that
slots and consumables are held concurrently, and finishes them (a share as failures). It
records every pull's latency and every response status. A monitor reads the books in
consistent snapshots while the clients run. Afterwards :func:`verify` checks that no job
was dispatched twice, none was lost, nothing was ever overbooked, and no client saw a 5xx.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import (
    Allocation,
    ConsumableUsage,
    Job,
    JobBooking,
    JobEvent,
    JobState,
    QueueInstance,
)
from app.db.models.history import JobEventKind
from app.matching.invariants import violations
from app.matching.submission import NO_SUITABLE_WORKER

ADMIN = "load-admin"
#: Reason a client gives when it reports a job as failed.
WORKER_FAILURE = "exit code 1"

LICENCE = {
    "name": "lic",
    "shortcut": "lic",
    "type": "INT",
    "relop": "<=",
    "requestable": "YES",
    "consumable": "JOB",
    "default": "0",
}
MEMORY = {
    "name": "mem",
    "shortcut": "mem",
    "type": "MEMORY",
    "relop": "<=",
    "requestable": "YES",
    "consumable": "YES",
    "default": "0",
}
#: The parallel environment: slots on one host, at most PE_SLOTS lent at a time.
PE = "smp"
PE_SLOTS = 12

#: Job kinds with weights: plain, memory, licence, both, parallel (with and without
#: memory), and a requirement no worker offers (fails at submission). A consumable request
#: beyond every capacity is not one: it is accepted and waits, as in Grid Engine.
JOB_KINDS: tuple[tuple[dict[str, Any], int], ...] = (
    ({}, 30),
    ({"slots": 2}, 8),
    ({"hard": "mem=1G"}, 12),
    ({"hard": "mem=2G"}, 6),
    ({"hard": "lic=1"}, 12),
    ({"hard": "lic=2,mem=1G"}, 8),
    ({"pe": PE, "pe_slots": "2"}, 8),
    ({"pe": PE, "pe_slots": "2-3", "hard": "mem=512M"}, 6),
    ({"pe": PE, "pe_slots": "3", "hard": "lic=1"}, 4),
    ({"resources": "language: haskell"}, 1),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Http:
    """A keep-alive loopback HTTP client with a bearer token."""

    def __init__(self, port: int, token: str, timeout: float = 60.0) -> None:
        self.port = port
        self.token = token
        self.timeout = timeout
        self.connection: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = None if body is None else json.dumps(body)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=self.timeout
                )
            try:
                self.connection.request(method, path, body=payload, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A keep-alive connection the server closed while idle: reconnect once.
                self.close()
                if attempt == 2:
                    raise
                continue
            if response.getheader("connection", "").lower() == "close":
                self.close()
            return response.status, json.loads(data) if data else None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class Server:
    """`jobmatch serve --workers N` in a child process on a loopback port."""

    def __init__(self, url: str, log: Path, workers: int) -> None:
        self.url = url
        self.port = free_port()
        self.log = log
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "JOBMATCH_DATABASE_URL": self.url,
            "JOBMATCH_ADMIN_TOKEN": ADMIN,
            # INFO: the server logs each transaction it runs again (app/api/retries.py).
            "JOBMATCH_LOG_LEVEL": "INFO",
            "JOBMATCH_LOG_FORMAT": "text",
            "JOBMATCH_LEASE_SWEEP_SECONDS": "0",
            # No lease may expire during the run: a requeue would be a second dispatch.
            "JOBMATCH_LEASE_SECONDS": "86400",
        }
        command = [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)]
        command += ["--workers", str(self.workers), "--no-migrate"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        admin = Http(self.port, ADMIN, timeout=5)
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                try:
                    if admin.request("GET", "/healthz")[0] == 200:
                        return
                except OSError:
                    admin.close()
                    time.sleep(0.1)
        finally:
            admin.close()
        raise AssertionError(f"server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@dataclass(frozen=True)
class LoadConfig:
    jobs: int
    clients: int
    #: "processes" (spawned; each its own interpreter) or "threads" (one process).
    mode: str = "processes"
    server_workers: int = 4
    #: Hard bound of the pulling phase; the clients stop at it even with work left.
    run_seconds: float = 300.0
    seed: int = 8
    submitters: int = 8
    #: A client holds up to this many jobs before it finishes the oldest.
    max_hold: int = 3
    failure_rate: float = 0.05
    #: Pause between the monitor's invariant checks (each reads every job).
    monitor_seconds: float = 1.0
    #: Seconds a pull may wait for work (``?wait=``, long-poll); 0: pulls answer at once
    #: and a client with nothing to do sleeps a little before it pulls again.
    long_poll_seconds: float = 0.0


@dataclass
class Submitted:
    waiting: list[int] = field(default_factory=list)
    failed_at_submission: list[int] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    seconds: float = 0.0


@dataclass
class ClientReport:
    worker: str
    dispatched: list[int] = field(default_factory=list)
    finished: list[tuple[int, str]] = field(default_factory=list)
    pull_latencies: list[float] = field(default_factory=list)
    #: Latencies of the pulls that returned a job.
    dispatch_latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    still_held: list[int] = field(default_factory=list)
    timed_out: bool = False

    def error(self, text: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(f"{self.worker}: {text}")


@dataclass
class LoadResult:
    config: LoadConfig
    submitted: Submitted
    reports: list[ClientReport]
    snapshots: int
    snapshot_problems: list[str]
    seconds: float
    #: Transactions the server retried (and gave up on), by reason.
    retries: Counter[str] = field(default_factory=Counter)

    def statuses(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for report in self.reports:
            total.update(report.statuses)
        return total

    def pull_latencies(self) -> list[float]:
        return sorted(x for r in self.reports for x in r.pull_latencies)

    def dispatch_latencies(self) -> list[float]:
        return sorted(x for r in self.reports for x in r.dispatch_latencies)


RETRIED = re.compile(r": (deadlock|serialization|busy), running the transaction again")
GAVE_UP = re.compile(r": (deadlock|serialization|busy) after \d+ attempts; giving up")


def server_retries(log: Path) -> Counter[str]:
    """Transactions the server ran again, and gave up on, by reason, from its log."""
    counts: Counter[str] = Counter()
    with log.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if match := RETRIED.search(line):
                counts[f"retried {match.group(1)}"] += 1
            elif match := GAVE_UP.search(line):
                counts[f"gave up {match.group(1)}"] += 1
    return counts


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return float("nan")
    rank = max(1, int(-(-share * len(values) // 1)))
    return values[min(len(values), rank) - 1]


def setup_cluster(port: int, clients: int, seed: int) -> dict[str, str]:
    """Attributes, global licences, the PE and one worker per client (2-4 slots, 4G or 8G
    of memory); returns each worker's token."""
    admin = Http(port, ADMIN)
    rng = random.Random(seed)
    try:
        for attribute in (LICENCE, MEMORY):
            status, body = admin.request("POST", "/v1/attributes", attribute)
            assert status == 201, body
        licences = max(2, clients // 2)
        status, body = admin.request(
            "PUT", "/v1/values/global", {"complex_values": {"lic": str(licences)}}
        )
        assert status == 200, body
        status, body = admin.request(
            "PUT", f"/v1/pes/{PE}", {"allocation_rule": "$pe_slots", "slots": PE_SLOTS}
        )
        assert status == 200, body
        tokens = {}
        for index in range(clients):
            name = f"w{index:03d}"
            status, body = admin.request(
                "POST", "/v1/workers", {"name": name, "slots": rng.choice([2, 3, 4])}
            )
            assert status == 201, body
            tokens[name] = body["token"]
            memory = rng.choice(["4G", "8G"])
            status, body = admin.request(
                "PUT", f"/v1/values/hosts/{name}", {"complex_values": {"mem": memory}}
            )
            assert status == 200, body
        return tokens
    finally:
        admin.close()


def job_bodies(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    kinds = [k for k, _ in JOB_KINDS]
    weights = [w for _, w in JOB_KINDS]
    return [{**rng.choices(kinds, weights)[0], "priority": rng.randint(0, 3)} for _ in range(count)]


def submit_all(port: int, bodies: Sequence[dict[str, Any]], submitters: int) -> Submitted:
    """POST every job from several threads; a 5xx is recorded (and the job re-sent, since
    nothing of a failed request is stored)."""
    result = Submitted()
    lock = threading.Lock()
    started = time.monotonic()

    def submitter(part: Sequence[dict[str, Any]]) -> None:
        client = Http(port, ADMIN)
        try:
            for body in part:
                while True:
                    status, answer = client.request("POST", "/v1/jobs", body)
                    with lock:
                        result.statuses[status] += 1
                    if status < 500:
                        break
                    time.sleep(0.05)
                assert status == 201, answer
                with lock:
                    if answer["state"] == "waiting":
                        result.waiting.append(answer["id"])
                    else:
                        assert answer["failure_reason"] == NO_SUITABLE_WORKER, answer
                        result.failed_at_submission.append(answer["id"])
        finally:
            client.close()

    threads = [
        threading.Thread(target=submitter, args=(bodies[i::submitters],)) for i in range(submitters)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = time.monotonic() - started
    assert sum(result.statuses.values()) >= len(bodies)
    return result


def client_loop(
    port: int, worker: str, token: str, config: LoadConfig, seed: int, go: Any
) -> ClientReport:
    """One worker: pull, hold up to ``max_hold`` jobs, finish them; until no job waits."""
    report = ClientReport(worker)
    rng = random.Random(seed)
    client = Http(port, token)
    # Listing jobs is a submitter's (here the admin's) right, not a worker's.
    observer = Http(port, ADMIN)
    held: list[int] = []
    hold_target = rng.randint(1, config.max_hold)
    pull_path = f"/v1/workers/{worker}/pull"
    # A client holding jobs pulls without waiting: its finishes must not queue behind a
    # wait (a real agent runs its jobs while it pulls; this loop does one thing at a time).
    waiting_pull = f"{pull_path}?wait={config.long_poll_seconds:g}"
    go.wait()
    deadline = time.monotonic() + config.run_seconds
    last_empty = False
    try:
        while True:
            if time.monotonic() > deadline:
                report.timed_out = True
                break
            if held and (len(held) >= hold_target or last_empty or rng.random() < 0.3):
                job_id = held[0]
                failed = rng.random() < config.failure_rate
                body = {"outcome": "failed", "reason": WORKER_FAILURE} if failed else {}
                status, answer = client.request(
                    "POST", f"/v1/jobs/{job_id}/finish", {"outcome": "finished", **body}
                )
                report.statuses[f"finish {status}"] += 1
                if status == 200:
                    held.pop(0)
                    report.finished.append((job_id, answer["state"]))
                    hold_target = rng.randint(1, config.max_hold)
                else:
                    report.error(f"finish {job_id}: {status} {answer}")
                    time.sleep(0.05)
                continue
            began = time.perf_counter()
            long_poll = config.long_poll_seconds > 0 and not held
            status, answer = client.request("POST", waiting_pull if long_poll else pull_path)
            elapsed = time.perf_counter() - began
            report.pull_latencies.append(elapsed)
            report.statuses[f"pull {status}"] += 1
            if status == 200:
                report.dispatch_latencies.append(elapsed)
                report.dispatched.append(answer["id"])
                held.append(answer["id"])
                last_empty = False
            elif status == 204:
                last_empty = True
                if not held:
                    if _nothing_waits(observer, report):
                        break
                    if not long_poll:  # a long-poll pull waited already
                        time.sleep(rng.uniform(0.02, 0.1))
            else:
                report.error(f"pull: {status} {answer}")
                time.sleep(0.05)
    except Exception as exc:  # recorded; the verification fails on it
        report.error(f"client loop: {exc!r}")
    finally:
        client.close()
        observer.close()
    report.still_held = held
    return report


def _nothing_waits(client: Http, report: ClientReport) -> bool:
    status, page = client.request("GET", "/v1/jobs?state=waiting&limit=1")
    report.statuses[f"list {status}"] += 1
    return status == 200 and not page["items"]


def _process_client(
    port: int, worker: str, token: str, config: LoadConfig, seed: int, go: Any, out: Any
) -> None:
    try:
        report = client_loop(port, worker, token, config, seed, go)
    except BaseException as exc:
        report = ClientReport(worker)
        report.error(f"process: {exc!r}")
    out.put(report)


class Monitor(threading.Thread):
    """Runs the invariant checker on consistent snapshots while the clients work."""

    def __init__(self, database: Database, interval: float) -> None:
        super().__init__(daemon=True)
        self.database = database
        self.interval = interval
        self.stop = threading.Event()
        self.snapshots = 0
        self.problems: list[str] = []

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            with self.database.engine.connect() as connection:
                if connection.dialect.name == "postgresql":
                    # One snapshot for all of the checker's statements.
                    connection = connection.execution_options(isolation_level="REPEATABLE READ")
                with Session(bind=connection) as session:
                    found = violations(session)
                    session.rollback()
            self.snapshots += 1
            self.problems += found[: max(0, 20 - len(self.problems))]


def run_load(url: str, config: LoadConfig, log: Path) -> LoadResult:
    """Start the server, set up the cluster, submit, let the clients drain the queue."""
    server = Server(url, log, config.server_workers)
    server.start()
    database = Database(url, busy_timeout=30.0)
    try:
        tokens = setup_cluster(server.port, config.clients, config.seed)
        submitted = submit_all(server.port, job_bodies(config.jobs, config.seed), config.submitters)
        monitor = Monitor(database, config.monitor_seconds)
        started = time.monotonic()
        reports = _run_clients(server.port, tokens, config, monitor)
        seconds = time.monotonic() - started
        return LoadResult(config, submitted, reports, monitor.snapshots, monitor.problems, seconds)
    finally:
        database.dispose()
        server.stop()


def _run_clients(
    port: int, tokens: dict[str, str], config: LoadConfig, monitor: Monitor
) -> list[ClientReport]:
    names = sorted(tokens)
    if config.mode == "threads":
        go_event = threading.Event()
        reports: list[ClientReport] = []
        lock = threading.Lock()

        def target(index: int, name: str) -> None:
            report = client_loop(port, name, tokens[name], config, config.seed + index, go_event)
            with lock:
                reports.append(report)

        threads = [
            threading.Thread(target=target, args=(i, n), daemon=True) for i, n in enumerate(names)
        ]
        for thread in threads:
            thread.start()
        monitor.start()
        go_event.set()
        for thread in threads:
            thread.join(config.run_seconds + 60)
        monitor.stop.set()
        monitor.join()
        return reports
    context = multiprocessing.get_context("spawn")
    go = context.Event()
    out = context.Queue()
    processes = [
        context.Process(
            target=_process_client,
            args=(port, n, tokens[n], config, config.seed + i, go, out),
            daemon=True,
        )
        for i, n in enumerate(names)
    ]
    for process in processes:
        process.start()
    monitor.start()
    go.set()
    collected = []
    deadline = time.monotonic() + config.run_seconds + 120
    try:
        while len(collected) < len(processes) and time.monotonic() < deadline:
            try:
                collected.append(out.get(timeout=1.0))
            except Exception:  # queue.Empty; keep waiting until the deadline
                continue
    finally:
        monitor.stop.set()
        monitor.join()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return collected


def verify(database: Database, result: LoadResult) -> dict[str, int]:
    """Every check of the run; raises AssertionError naming what broke, else the counts."""
    config, submitted, reports = result.config, result.submitted, result.reports
    assert len(reports) == config.clients, f"{config.clients - len(reports)} clients lost"
    errors = [e for r in reports for e in r.errors]
    assert not errors, f"clients reported errors: {errors[:10]}"
    statuses = result.statuses()
    server_errors = {k: v for k, v in statuses.items() if k.split()[-1].startswith("5")}
    assert not server_errors, f"clients saw 5xx: {server_errors}"
    assert not [s for s in submitted.statuses if s >= 500], submitted.statuses
    if [r.worker for r in reports if r.timed_out]:
        with database.transaction(write=False) as session:
            left = Counter(
                (job.hard, job.pe, job.pe_slots, job.slots, job.state.value)
                for job in session.scalars(
                    select(Job).where(Job.state.in_([JobState.WAITING, JobState.RUNNING]))
                )
            )
        raise AssertionError(f"clients ran out of time; jobs left: {dict(left)}")
    assert not [j for r in reports for j in r.still_held], "jobs left held"
    assert result.snapshots > 0 and not result.snapshot_problems, result.snapshot_problems
    assert not [k for k in result.retries if k.startswith("gave up")], result.retries

    # No job dispatched twice: by what clients received and by the dispatch log.
    dispatched = [j for r in reports for j in r.dispatched]
    assert len(dispatched) == len(set(dispatched)), "a job was handed out twice"
    finished = {j: state for r in reports for j, state in r.finished}
    assert set(finished) == set(dispatched), "a pulled job was not finished, or vice versa"
    waiting = set(submitted.waiting)
    assert set(dispatched) == waiting, (
        f"{len(waiting - set(dispatched))} submitted jobs never dispatched, "
        f"{len(set(dispatched) - waiting)} dispatched jobs never submitted as waiting"
    )
    with database.transaction(write=False) as session:
        assert violations(session) == []
        twice = session.execute(
            select(JobEvent.job_id)
            .where(JobEvent.kind == JobEventKind.DISPATCHED)
            .group_by(JobEvent.job_id)
            .having(func.count() > 1)
        ).all()
        assert not twice, f"jobs dispatched twice in the log: {twice[:10]}"
        requeued = session.scalar(
            select(func.count()).where(JobEvent.kind == JobEventKind.REQUEUED)
        )
        assert requeued == 0
        logged = set(
            session.scalars(select(JobEvent.job_id).where(JobEvent.kind == JobEventKind.DISPATCHED))
        )
        assert logged == waiting

        # No lost job: every job ended as its worker said or failed at submission.
        states = {job_id: state for job_id, state in session.execute(select(Job.id, Job.state))}
        assert len(states) == config.jobs
        assert set(states) == waiting | set(submitted.failed_at_submission)
        for job_id, state in states.items():
            expected = (
                JobState.FAILED if job_id in submitted.failed_at_submission else None
            ) or JobState(finished[job_id])
            assert state is expected, f"job {job_id} is {state.value}, expected {expected}"
        reasons = Counter(
            session.scalars(select(Job.failure_reason).where(Job.state == JobState.FAILED))
        )
        worker_failed = sum(1 for s in finished.values() if s == "failed")
        assert reasons == Counter(
            {
                k: v
                for k, v in {
                    NO_SUITABLE_WORKER: len(submitted.failed_at_submission),
                    WORKER_FAILURE: worker_failed,
                }.items()
                if v
            }
        )
        # Everything given back.
        assert session.scalar(select(func.count()).where(Allocation.released_at.is_(None))) == 0
        assert session.scalar(select(func.sum(QueueInstance.used_slots))) == 0
        assert session.scalar(select(func.count()).select_from(JobBooking)) == 0
        assert not session.scalar(
            select(func.count()).where(
                (ConsumableUsage.used != 0) | (ConsumableUsage.used_nonexclusive != 0)
            )
        )
        parallel = session.scalar(
            select(func.count()).where(Job.pe.is_not(None), Job.state == JobState.FINISHED)
        )
        consumers = session.scalar(
            select(func.count(func.distinct(Allocation.job_id))).where(
                Allocation.job_id.in_(select(Job.id).where(Job.hard.is_not(None), Job.hard != ""))
            )
        )
    return {
        "jobs": config.jobs,
        "dispatched": len(dispatched),
        "finished": sum(1 for s in finished.values() if s == "finished"),
        "failed by worker": worker_failed,
        "failed at submission": len(submitted.failed_at_submission),
        "parallel finished": int(parallel or 0),
        "with consumables": int(consumers or 0),
        "snapshots checked": result.snapshots,
    }


def summary(result: LoadResult, numbers: dict[str, int]) -> str:
    pulls = result.pull_latencies()
    hits = result.dispatch_latencies()
    statuses = result.statuses()
    non_2xx = {k: v for k, v in sorted(statuses.items()) if not k.split()[-1].startswith("2")}
    lines = [
        f"backend clients={result.config.clients} ({result.config.mode}), "
        f"server workers={result.config.server_workers}, jobs={result.config.jobs}",
        f"submission: {result.submitted.seconds:.1f} s, statuses "
        f"{dict(sorted(result.submitted.statuses.items()))}",
        f"pulling phase: {result.seconds:.1f} s, "
        f"{numbers['dispatched'] / result.seconds:.0f} jobs/s dispatched and finished, "
        f"{len(pulls) / result.seconds:.0f} pulls/s"
        + (
            f" (long-poll, wait={result.config.long_poll_seconds:g} s)"
            if result.config.long_poll_seconds > 0
            else " (no long-poll)"
        ),
        "jobs: " + ", ".join(f"{k}={v}" for k, v in numbers.items()),
        f"requests: {dict(sorted(statuses.items()))}",
        f"errors seen by clients (non-2xx): {non_2xx or 'none'}",
        f"transactions the server ran again: {dict(sorted(result.retries.items())) or 'none'}",
        f"pull latency (all {len(pulls)} pulls): p50={percentile(pulls, 0.5) * 1000:.1f} ms "
        f"p99={percentile(pulls, 0.99) * 1000:.1f} ms max={pulls[-1] * 1000:.1f} ms",
        f"pull latency (the {len(hits)} that returned a job): "
        f"p50={percentile(hits, 0.5) * 1000:.1f} ms p99={percentile(hits, 0.99) * 1000:.1f} ms",
    ]
    return "\n".join(lines)
