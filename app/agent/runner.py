"""The agent's loop: report facts, pull, run the job's command, report its end.

A (re)started agent reports its dynamic metadata before it pulls (debusine issue #8), and again
whenever a pull or heartbeat response asks for it. On SIGTERM it stops pulling; a running
command gets ``grace`` seconds to finish (then its result is reported as usual), after
which it is terminated and the job is returned to the queue, unfinished, for another
worker.

Every job the agent takes is written to its spool (app/agent/spool.py) before its
command starts, and its command runs in a process group that dies with the agent
(app/agent/processes.py). A restarted agent first kills and gives back the jobs it left
running and resends the outcomes the server may not have, and only then pulls.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.agent import processes
from app.agent.client import ApiError, Client
from app.agent.facts import analyze
from app.agent.spool import Spool, SpoolEntry

log = logging.getLogger("jobmatch.agent")

REFRESH_HEADER = "jobmatch-refresh-metadata"
#: The tail of a command's output that is reported, in characters.
OUTPUT_TAIL = 65_536
#: Seconds a terminated command has to exit before it is killed.
KILL_AFTER = 5.0
#: Why a job left running by an earlier life of the agent is given back.
RESTARTED = "agent restarted; the job's processes were killed"


@dataclass(frozen=True)
class AgentOptions:
    name: str
    poll_interval: float = 5.0
    heartbeat_interval: float = 30.0
    grace: float = 30.0
    #: Stop after this many jobs (None: run until told to stop).
    max_jobs: int | None = None
    #: Where the agent keeps its taken jobs across restarts (None: nowhere; tests only).
    spool: Path | None = None


@dataclass(frozen=True)
class Outcome:
    """How a command ended: ``returned`` when the agent stopped it to give the job back."""

    kind: str  # finished, failed, returned
    exit_code: int | None
    output: str
    reason: str | None = None


class Agent:
    def __init__(self, client: Client, options: AgentOptions) -> None:
        self.client = client
        self.options = options
        self.stopping = threading.Event()
        self._refresh_wanted = False
        self.spool = Spool(options.spool) if options.spool is not None else None

    # ------------------------------------------------------------------ the server
    def _task_types(self) -> list[Any]:
        """Every registered task type, read page by page."""
        tasks: list[Any] = []
        offset: int | None = 0
        while offset is not None:
            page = self.client.request("GET", f"/v1/tasks?limit=500&offset={offset}").body or {}
            tasks += page.get("items", [])
            offset = page.get("next_offset")
        return tasks

    def report_metadata(self) -> None:
        tasks = self._task_types()
        report = analyze(tasks)
        self.client.request(
            "POST", f"/v1/workers/{self.options.name}/metadata", {"metadata": report}
        )
        self._refresh_wanted = False
        log.info("reported metadata: %s", ", ".join(sorted(report)))

    def _heartbeat(self) -> None:
        try:
            reply = self.client.request("POST", f"/v1/workers/{self.options.name}/heartbeat")
        except ApiError as error:
            log.warning("heartbeat failed: %s", error)
            return
        if reply.body and reply.body.get("refresh_metadata"):
            self._refresh_wanted = True

    def stop(self, *_args: object) -> None:
        """Stop after (or, past the grace period, instead of) the current job."""
        log.info("stopping")
        self.stopping.set()

    # ------------------------------------------------------------------ the spool
    def recover(self) -> None:
        """Before any pull: kill and give back the jobs an earlier life of the agent left
        running, and resend the outcomes the server may not have. Retried until the
        server has them all (or the agent is told to stop)."""
        if self.spool is None:
            return
        for entry in self.spool.entries():
            if entry.outcome is None:
                killed = []
                if entry.pgid is not None and entry.boot == processes.boot_id():
                    killed = processes.kill_group_left(entry.pgid, entry.started)
                log.warning("job %s was left running; killed %s", entry.job, killed or "nothing")
                outcome = Outcome("returned", None, "", RESTARTED)
                self.spool.write(SpoolEntry(entry.job, outcome=asdict(outcome)))
        while not self.stopping.is_set() and not self._resend_pending():
            self.stopping.wait(self.options.poll_interval)

    def _resend_pending(self) -> bool:
        """Send every outcome still in the spool; True when none is left."""
        if self.spool is None:
            return True
        pending = [(e.job, e.outcome) for e in self.spool.entries() if e.outcome is not None]
        return all(self._report(job, Outcome(**outcome)) for job, outcome in pending)

    def _report(self, job_id: int, outcome: Outcome) -> bool:
        """Tell the server how the job ended; True once the server has decided (accepted,
        or refused for good), when the spool may forget the job."""
        try:
            if outcome.kind == "returned":
                self.client.request("POST", f"/v1/jobs/{job_id}/return", {"reason": outcome.reason})
            else:
                self.client.request(
                    "POST",
                    f"/v1/jobs/{job_id}/finish",
                    {
                        "outcome": outcome.kind,
                        "reason": outcome.reason,
                        "exit_code": outcome.exit_code,
                        "output": outcome.output,
                    },
                )
        except ApiError as error:
            log.warning("could not report job %s: %s", job_id, error)
            if error.status == 0 or error.status >= 500 or error.status in (408, 429):
                return False  # kept in the spool and sent again
            # E.g. the job was cancelled or requeued meanwhile (409): the server has it.
        if self.spool is not None:
            self.spool.remove(job_id)
        return True

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        self.recover()
        self.report_metadata()
        done = 0
        while not self.stopping.is_set():
            if self._refresh_wanted:
                self.report_metadata()
            if not self._resend_pending():
                self.stopping.wait(self.options.poll_interval)
                continue  # outcomes first: the server must not count this worker idle
            try:
                reply = self.client.request("POST", f"/v1/workers/{self.options.name}/pull")
            except ApiError as error:
                log.warning("pull failed: %s", error)
                self.stopping.wait(self.options.poll_interval)
                continue
            if reply.headers.get(REFRESH_HEADER) == "true":
                self._refresh_wanted = True
            if reply.status == 204 or reply.body is None:
                self.stopping.wait(self.options.poll_interval)
                continue
            self.run_job(reply.body)
            done += 1
            if self.options.max_jobs is not None and done >= self.options.max_jobs:
                break
        return 0

    def run_job(self, job: dict[str, Any]) -> Outcome:
        job_id = job["id"]
        log.info("running job %s", job_id)
        if self.spool is not None:
            self.spool.write(SpoolEntry(job_id))
        outcome = self._execute(job_id, job.get("command"), job.get("timeout"))
        if self.spool is not None:
            self.spool.write(SpoolEntry(job_id, outcome=asdict(outcome)))
        self._report(job_id, outcome)
        log.info("job %s: %s", job_id, outcome.kind)
        return outcome

    def _execute(self, job_id: int, command: list[str] | None, timeout: int | None) -> Outcome:
        if not command:
            return Outcome("finished", None, "", None)
        if shutil.which(command[0]) is None:
            return Outcome("failed", None, "", f"cannot start {command[0]!r}: not found")
        try:
            job = processes.start_job(command)
        except OSError as error:
            return Outcome("failed", None, "", f"cannot start {command[0]!r}: {error}")
        try:
            if self.spool is not None:
                self.spool.write(SpoolEntry(job_id, job.pgid, job.started, processes.boot_id()))
            return self._watch(job, timeout)
        finally:
            # However the watch ended (an error, KeyboardInterrupt): nothing of the job
            # outlives it. The shim is reaped here, its group id no longer guarded.
            if job.popen.poll() is None:
                processes.signal_group(job, signal.SIGKILL)
                job.popen.wait()
            processes.kill_group_left(job.pgid, job.started)

    def _watch(self, job: processes.JobProcess, timeout: int | None) -> Outcome:
        process = job.popen
        tail: deque[str] = deque()
        reader = threading.Thread(target=_read_tail, args=(process, tail), daemon=True)
        reader.start()
        started = time.monotonic()
        next_heartbeat = started + self.options.heartbeat_interval
        stop_deadline: float | None = None
        ended_by: str | None = None
        while process.poll() is None:
            now = time.monotonic()
            if timeout is not None and now - started >= timeout:
                ended_by = "timeout"
                _terminate(job)
                break
            if self.stopping.is_set() and stop_deadline is None:
                stop_deadline = now + self.options.grace
            if stop_deadline is not None and now >= stop_deadline:
                ended_by = "stop"
                _terminate(job)
                break
            if now >= next_heartbeat:
                self._heartbeat()
                next_heartbeat = now + self.options.heartbeat_interval
            time.sleep(0.05)
        process.wait()
        reader.join(timeout=KILL_AFTER)
        output = "".join(tail)[-OUTPUT_TAIL:]
        code = process.returncode
        if ended_by == "stop":
            return Outcome("returned", code, output, "the worker stopped")
        if ended_by == "timeout":
            return Outcome("failed", code, output, f"timed out after {timeout} s")
        if code == 0:
            return Outcome("finished", 0, output)
        if code < 0:
            return Outcome("failed", code, output, f"killed by signal {-code}")
        return Outcome("failed", code, output, f"exit status {code}")


def _read_tail(process: subprocess.Popen[bytes], tail: deque[str]) -> None:
    """Keep the last OUTPUT_TAIL characters (roughly) of the command's output."""
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    size = 0
    # os.read returns what is there (a pipe read never waits for a full buffer).
    for chunk in iter(lambda: os.read(descriptor, 8192), b""):
        text = chunk.decode("utf-8", "replace")
        tail.append(text)
        size += len(text)
        while size - len(tail[0]) > OUTPUT_TAIL:
            size -= len(tail.popleft())


def _terminate(job: processes.JobProcess) -> None:
    """SIGTERM to the command's process group, SIGKILL if it lingers."""
    processes.signal_group(job, signal.SIGTERM)
    try:
        job.popen.wait(timeout=KILL_AFTER)
    except subprocess.TimeoutExpired:
        processes.signal_group(job, signal.SIGKILL)
