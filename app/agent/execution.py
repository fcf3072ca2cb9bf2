"""Running one job: a clean environment, a working directory of its own, its command in a
process group of its own (app/agent/processes.py), its output streamed to the server while
it runs, and the outcome.

The job's environment is built from an allow-list, never copied from the agent's: the
agent's own token (JOBMATCH_WORKER_TOKEN) must not reach a job, which could then act as the
worker. The whole process group is stopped on timeout, on the agent's stop after the grace
period, and when the server says the job is no longer this worker's (it was cancelled, or
requeued after a lost lease), which the agent learns when it streams output.
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from app.agent import processes
from app.client import ClientError, Conflict, Forbidden, WorkerClient
from app.client.models import Job

log = logging.getLogger("jobmatch.agent")

#: Variables a job gets from the agent's environment (plus those the operator passes with
#: --pass-env). Everything else, the agent's token first, stays out.
ALLOWED_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")
#: The variable the agent reads its token from; never passed on, whatever --pass-env says.
TOKEN_VARIABLE = "JOBMATCH_WORKER_TOKEN"
#: The tail of a command's output reported with its end, in characters.
OUTPUT_TAIL = 65_536
#: Characters of output the agent holds for the server while it cannot send them; older
#: ones are dropped (the server learns of the gap from the next chunk's offset).
PENDING_LIMIT = 1024 * 1024
#: Largest chunk sent at once (the server's request body limit is 1 MiB of JSON).
CHUNK_CHARS = 256 * 1024
#: Seconds a terminated command has to exit before it is killed.
KILL_AFTER = 5.0


@dataclass(frozen=True)
class Outcome:
    """How a job ended on this agent. ``finished`` and ``failed`` are reported with the
    finish call, ``returned`` gives the job back unrun, ``dropped`` means the server no
    longer counts the job as this worker's (cancelled or requeued): nothing to report."""

    kind: str  # finished, failed, returned, dropped
    exit_code: int | None
    output: str
    reason: str | None = None


@dataclass(frozen=True)
class RunOptions:
    worker: str
    work_dir: Path
    heartbeat_interval: float = 30.0
    output_interval: float = 1.0
    grace: float = 30.0


NO_COMMAND = "the job has no command; this agent runs a job's command and there is none"


def job_environment(
    job: Job, worker: str, source: Mapping[str, str], passed: Iterable[str] = (), secret: str = ""
) -> dict[str, str]:
    """The environment a job starts with: the allowed variables of ``source`` (the agent's
    environment) and the job's own JOBMATCH_* facts. A variable whose value holds the
    agent's token (``secret``) is left out, whatever its name."""
    names = [*ALLOWED_ENVIRONMENT, *passed]
    env = {
        name: source[name]
        for name in names
        if name in source and name != TOKEN_VARIABLE and not (secret and secret in source[name])
    }
    env.setdefault("PATH", os.defpath)
    env.update(
        JOBMATCH_JOB_ID=str(job.id),
        JOBMATCH_WORKER=worker,
        JOBMATCH_JOB_SLOTS=str(job.slots),
        JOBMATCH_JOB_ATTEMPT=str(job.attempts),
    )
    env.update(task_environment(job))
    return env


def task_environment(job: Job) -> dict[str, str]:
    """A task of an array job (qsub -t): its id as JOBMATCH_TASK_ID and by Grid Engine's
    names (qsub(1) of Grid Engine 6.2u5: SGE_TASK_ID, and the array's range as
    SGE_TASK_FIRST, SGE_TASK_LAST and SGE_TASK_STEPSIZE); nothing for another job. Grid
    Engine sets SGE_TASK_ID to "undefined" for a job that is not an array; jobmatch
    leaves it unset instead."""
    if job.task_id is None:
        return {}
    env = {"JOBMATCH_TASK_ID": str(job.task_id), "SGE_TASK_ID": str(job.task_id)}
    first, _, rest = (job.task_range or "").partition("-")
    last, _, step = rest.partition(":")
    if first.isdigit() and last.isdigit() and step.isdigit():
        env.update(SGE_TASK_FIRST=first, SGE_TASK_LAST=last, SGE_TASK_STEPSIZE=step)
    return env


def printable(text: str) -> str:
    """``text`` as the API accepts it: no NUL characters (they end strings in C)."""
    return text.replace("\x00", "\ufffd")


class OutputStream:
    """A command's output as it is read: the tail kept for the final report, and the text
    the server does not have yet, from an absolute offset (characters)."""

    def __init__(self, tail_chars: int = OUTPUT_TAIL, pending_limit: int = PENDING_LIMIT) -> None:
        self._lock = threading.Lock()
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._tail_chars = tail_chars
        self._pending = ""
        self._pending_start = 0
        self._pending_limit = pending_limit

    def add(self, text: str) -> None:
        text = printable(text)
        with self._lock:
            self._tail.append(text)
            self._tail_size += len(text)
            while self._tail_size - len(self._tail[0]) > self._tail_chars:
                self._tail_size -= len(self._tail.popleft())
            self._pending += text
            overflow = len(self._pending) - self._pending_limit
            if overflow > 0:
                self._pending = self._pending[overflow:]
                self._pending_start += overflow

    def pending(self) -> tuple[int, str]:
        """Where the unsent text starts, and (up to CHUNK_CHARS of) it."""
        with self._lock:
            return self._pending_start, self._pending[:CHUNK_CHARS]

    def acknowledge(self, next_offset: int) -> None:
        """The server has everything before ``next_offset``."""
        with self._lock:
            cut = next_offset - self._pending_start
            if cut > 0:
                self._pending = self._pending[cut:]
                self._pending_start = next_offset

    def tail(self) -> str:
        with self._lock:
            return "".join(self._tail)[-self._tail_chars :]


class JobRun:
    """One job on this agent, from its start to its outcome (not reported here)."""

    def __init__(
        self,
        client: WorkerClient,
        job: Job,
        options: RunOptions,
        stopping: threading.Event,
        *,
        on_started: Callable[[processes.JobProcess], None] | None = None,
    ) -> None:
        self.client = client
        self.job = job
        self.options = options
        self.stopping = stopping
        self.on_started = on_started
        self.output = OutputStream()
        self._lost: str | None = None

    def execute(self, environment: dict[str, str]) -> Outcome:
        command = self.job.command
        if not command:
            return Outcome("failed", None, "", NO_COMMAND)
        if shutil.which(command[0], path=environment.get("PATH")) is None:
            return Outcome("failed", None, "", f"cannot start {command[0]!r}: not found")
        work = self.options.work_dir / f"job-{self.job.id}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            work.mkdir(parents=True, mode=0o700)
            started = processes.start_job(command, env=environment, cwd=work)
        except OSError as error:
            return Outcome("failed", None, "", f"cannot start {command[0]!r}: {error}")
        try:
            if self.on_started is not None:
                self.on_started(started)
            return self._watch(started)
        finally:
            # However the watch ended (an error, KeyboardInterrupt): nothing of the job
            # outlives it. The shim is reaped here, its group id no longer guarded.
            if started.popen.poll() is None:
                processes.signal_group(started, signal.SIGKILL)
                started.popen.wait()
            processes.kill_group_left(started.pgid, started.started)
            shutil.rmtree(work, ignore_errors=True)

    def _watch(self, job: processes.JobProcess) -> Outcome:
        process = job.popen
        reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        reader.start()
        began = time.monotonic()
        timeout = self.job.timeout
        next_send = began + self.options.output_interval
        next_probe = began + self.options.heartbeat_interval
        stop_deadline: float | None = None
        ended_by: str | None = None
        while process.poll() is None:
            now = time.monotonic()
            if timeout is not None and now - began >= timeout:
                ended_by = "timeout"
            elif self.stopping.is_set() and stop_deadline is None:
                stop_deadline = now + self.options.grace
            if stop_deadline is not None and now >= stop_deadline:
                ended_by = "stop"
            if now >= next_send:
                # An empty chunk now and then asks whether the job is still ours.
                self._send_output(probe=now >= next_probe)
                next_send = now + self.options.output_interval
                next_probe = (
                    next_probe if now < next_probe else now + self.options.heartbeat_interval
                )
            if self._lost is not None:
                ended_by = "lost"
            if ended_by is not None:
                terminate(job)
                break
            time.sleep(0.05)
        process.wait()
        reader.join(timeout=KILL_AFTER)
        if ended_by != "lost":
            self._send_output(probe=False)
        return self._outcome(process.returncode, ended_by)

    def _outcome(self, code: int, ended_by: str | None) -> Outcome:
        output = self.output.tail()
        if ended_by == "lost":
            return Outcome("dropped", code, output, self._lost)
        if ended_by == "stop":
            return Outcome("returned", code, output, "the worker stopped")
        if ended_by == "timeout":
            return Outcome("failed", code, output, f"timed out after {self.job.timeout} s")
        if code == 0:
            return Outcome("finished", 0, output)
        if code < 0:
            return Outcome("failed", code, output, f"killed by signal {-code}")
        return Outcome("failed", code, output, f"exit status {code}")

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        # os.read returns what is there (a pipe read never waits for a full buffer).
        for chunk in iter(lambda: os.read(descriptor, 8192), b""):
            self.output.add(chunk.decode("utf-8", "replace"))

    def _send_output(self, *, probe: bool) -> None:
        """Send what the server does not have of the output (an empty chunk when ``probe``);
        a refusal that says the job is not this worker's any more ends the job."""
        offset, text = self.output.pending()
        if not text and not probe:
            return
        try:
            sent = self.client.append_output(self.job.id, offset, text)
        except (Conflict, Forbidden) as refused:
            self._lost = f"the server no longer runs job {self.job.id} here: {refused.detail}"
            log.warning("job %s: %s", self.job.id, self._lost, extra={"job": self.job.id})
        except ClientError as error:
            # Kept and sent with the next chunk; an older server has no output route.
            log.debug("job %s: output not sent: %s", self.job.id, error)
        else:
            self.output.acknowledge(sent.next_offset)


def terminate(job: processes.JobProcess) -> None:
    """SIGTERM to the command's process group, SIGKILL if it lingers."""
    processes.signal_group(job, signal.SIGTERM)
    try:
        job.popen.wait(timeout=KILL_AFTER)
    except subprocess.TimeoutExpired:
        processes.signal_group(job, signal.SIGKILL)
