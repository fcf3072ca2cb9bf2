"""The agent's loop: report facts and load, pull with long-poll, run up to ``slots`` jobs at
once, report each end.

A (re)started agent reports its dynamic metadata before it pulls (debusine issue #8), and
again whenever a pull or heartbeat answer asks for it; its Grid Engine load values go with
it and then every ``load_interval`` seconds. It waits for work with long-poll pulls
(``wait`` seconds); a server that answers at once (one without long-poll) is asked again
only after ``poll_interval``.

When the server cannot be reached or answers 5xx, the agent waits and tries again, longer
each time (exponential backoff with jitter, capped at ``backoff_max``), whether at start or
later. When it refuses the worker's token (401) or this worker (403), retrying cannot help:
the agent stops with a message and a non-zero exit.

Every job the agent takes is written to its spool (app/agent/spool.py) before its command
starts, and its outcome before it is sent, so a result is never lost: what the server did
not acknowledge is sent again after a reconnect or a restart. A restarted agent first kills
and gives back the jobs it left running and resends the outcomes, and only then pulls.

It pulls with batch pulls (``POST /v1/workers/{name}/pull-batch``): one request asks for
a job for every free slot and carries the ends of the jobs that finished since the last
one, so that a busy worker sends one request per job instead of two. A pull that carries
ends does not wait on the server (its answer acknowledges them at once); the next one
does. A job that ends while a pull waits on the server is reported at once instead (its
slot would otherwise stay booked for the whole wait). A server without batch pulls (404
or 405) gets single pulls and finishes, as before.

On SIGTERM it stops pulling (a pull waiting on the server is cancelled: its connection is
shut, and the server, seeing the worker gone, takes no job for it); running commands get
``grace`` seconds to finish (their results are reported as usual), after which they are
terminated and their jobs returned to the queue, unfinished, for another worker.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.agent import processes
from app.agent.execution import JobRun, Outcome, RunOptions, job_environment, printable
from app.agent.facts import analyze
from app.agent.load import load_values
from app.agent.spool import Spool, SpoolEntry
from app.client import (
    ApiError,
    ClientError,
    EndReport,
    Forbidden,
    RequestTimeout,
    ServerError,
    ServerUnreachable,
    TooManyRequests,
    Unauthorized,
    UnexpectedResponse,
    WorkerClient,
)
from app.client.models import Ended, Job, Task

log = logging.getLogger("jobmatch.agent")

#: Why a job left running by an earlier life of the agent is given back.
RESTARTED = "agent restarted; the job's processes were killed"
#: Why a job pulled while the agent was stopping is given back at once.
STOPPING = "the worker is stopping"


class WorkerRefused(Exception):
    """The server refused this worker's token (401) or this worker (403) or named it
    unknown: retrying cannot help, the agent stops. The message says what to check."""


@dataclass(frozen=True)
class AgentOptions:
    name: str
    slots: int = 1
    #: Seconds a pull may wait on the server for a job (long-poll).
    wait: float = 30.0
    #: Seconds between pulls when the server answers at once (no long-poll there).
    poll_interval: float = 5.0
    heartbeat_interval: float = 30.0
    load_interval: float = 60.0
    output_interval: float = 1.0
    grace: float = 30.0
    #: First and longest wait between tries while the server cannot be reached.
    backoff_initial: float = 0.5
    backoff_max: float = 60.0
    #: Stop after this many jobs (None: run until told to stop).
    max_jobs: int | None = None
    #: Where the agent keeps its taken jobs across restarts (None: nowhere; tests only).
    spool: Path | None = None
    #: Where each job gets its working directory (job-ID, removed when it ends).
    work_dir: Path = field(default_factory=lambda: Path("work"))
    #: Variables of the agent's environment passed to jobs besides the allowed ones.
    pass_env: tuple[str, ...] = ()


class Backoff:
    """Waits that double from ``initial`` up to ``ceiling``, each with full jitter (a random
    part of it, so that agents restarted together do not knock together). Its waits end
    early when the agent is told to stop, which a library's sleep would not."""

    def __init__(self, initial: float, ceiling: float, stopping: threading.Event) -> None:
        self.initial, self.ceiling, self.stopping = initial, ceiling, stopping
        self.failures = 0

    def next_delay(self) -> float:
        capped = min(self.ceiling, self.initial * 2.0**self.failures)
        self.failures += 1
        return capped / 2 + random.uniform(0, capped / 2)

    def wait(self) -> None:
        self.stopping.wait(self.next_delay())

    def reset(self) -> None:
        self.failures = 0


def _transient(error: Exception) -> bool:
    """An error that may pass by itself: no answer, a 5xx, 408 or 429, or a proxy's page."""
    transient = (ServerUnreachable, ServerError, RequestTimeout, TooManyRequests)
    return isinstance(error, (*transient, UnexpectedResponse))


def _refusal(error: ApiError) -> WorkerRefused:
    if isinstance(error, Unauthorized):
        hint = "check the worker's token (JOBMATCH_WORKER_TOKEN): it is unknown or revoked"
    elif isinstance(error, Forbidden):
        hint = "check --name: the token belongs to another worker, or is not a worker token"
    else:
        hint = "the server refuses this worker"
    return WorkerRefused(f"the server refused this worker ({error}); {hint}")


class Agent:
    def __init__(self, client: WorkerClient, options: AgentOptions, *, secret: str = "") -> None:
        self.client = client
        self.options = options
        self.secret = secret
        self.stopping = threading.Event()
        self.spool = Spool(options.spool) if options.spool is not None else None
        self.refused: WorkerRefused | None = None
        self._refresh_wanted = False
        self._free = threading.Semaphore(options.slots)
        self._running: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._load_supported = True
        self._backoff = Backoff(options.backoff_initial, options.backoff_max, self.stopping)
        #: A pull still waiting on the server when the agent was told to stop.
        self._abandoned: Future[list[Job]] | None = None
        #: Ends of jobs (finished, failed) waiting for the next batch pull to carry them,
        #: by job id; under ``_lock``, with ``_pulling`` (a pull is on its way).
        self._ends: dict[int, Outcome] = {}
        self._pulling = False
        #: The ends the last pull carried: kept again when that pull is abandoned at a
        #: stop and its answer does not come (:meth:`_finish`).
        self._abandoned_ends: dict[int, Outcome] = {}
        #: Whether the last pull asked the server to wait for work (long-poll).
        self._waited = True
        #: False once the server answered a batch pull 404 or 405 (it has none).
        self._batch_supported = True

    def stop(self, *_args: object) -> None:
        """Stop pulling; running jobs get the grace period (a signal handler)."""
        if not self.stopping.is_set():
            log.info("stopping: no new jobs; running ones have %s s", self.options.grace)
        self.stopping.set()

    # ------------------------------------------------------------------ talking, with retries
    def _until_done(self, what: str, action: Callable[[], object]) -> bool:
        """Run ``action`` until it succeeds (True) or the agent stops (False), backing off
        while the server cannot be reached; a refusal stops the agent."""
        while not self.stopping.is_set():
            try:
                action()
            except ApiError as error:
                if not _transient(error):
                    raise _refusal(error) from None
                log.warning("%s failed: %s", what, error)
            except ClientError as error:
                log.warning("%s failed: %s", what, error)
            else:
                self._backoff.reset()
                return True
            self._backoff.wait()
        return False

    def _task_types(self) -> list[Task]:
        """Every registered task type, read page by page."""
        tasks: list[Task] = []
        offset: int | None = 0
        while offset is not None:
            page = self.client.list_tasks(limit=500, offset=offset)
            tasks += page.items
            offset = page.next_offset
        return tasks

    def report_metadata(self) -> None:
        report = analyze(self._task_types())
        self.client.report_metadata(report)
        self._refresh_wanted = False
        log.info("reported metadata: %s", ", ".join(sorted(report)))

    def report_load(self) -> None:
        """Send the host's load values; a server without the route (404/405) is not asked
        again."""
        if not self._load_supported:
            return
        try:
            self.client.report_load(load_values())
        except ApiError as error:
            if error.status in (404, 405):
                self._load_supported = False
                log.warning("the server takes no load values (%s); not reporting them", error)
            elif not _transient(error):
                raise _refusal(error) from None
            else:
                log.warning("load report failed: %s", error)
        except ClientError as error:
            log.warning("load report failed: %s", error)

    # ------------------------------------------------------------------ the spool
    def recover(self) -> None:
        """Before any pull: kill and give back the jobs an earlier life of the agent left
        running, and resend the outcomes the server may not have."""
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
            self._backoff.wait()
        self._backoff.reset()

    def _resend_pending(self) -> bool:
        """Send every outcome still in the spool that no job thread owns; True when none
        is left."""
        if self.spool is None:
            return True
        with self._lock:
            owned = set(self._running) | set(self._ends)
        pending = [
            (entry.job, Outcome(**entry.outcome))
            for entry in self.spool.entries()
            if entry.outcome is not None and entry.job not in owned
        ]
        return all([self._report(job, outcome) for job, outcome in pending])

    def _report(self, job_id: int, outcome: Outcome) -> bool:
        """Tell the server how the job ended; True once the server has decided (accepted,
        or refused for good), when the spool may forget the job."""
        try:
            if outcome.kind == "returned":
                self.client.return_job(job_id, reason=outcome.reason)
            elif outcome.kind in ("finished", "failed"):
                self.client.finish_job(
                    job_id,
                    "finished" if outcome.kind == "finished" else "failed",
                    reason=outcome.reason,
                    exit_code=outcome.exit_code,
                    output=printable(outcome.output),
                )
        except ApiError as error:
            if _transient(error):
                log.warning("could not report job %s: %s; kept to send again", job_id, error)
                return False
            if isinstance(error, Unauthorized):
                self.refused = _refusal(error)
                self.stopping.set()
                return False
            # E.g. the job was cancelled or requeued meanwhile (409): the server decided.
            log.warning("the server refused the report of job %s: %s", job_id, error)
        except ClientError as error:
            log.warning("could not report job %s: %s; kept to send again", job_id, error)
            return False
        if self.spool is not None:
            self.spool.remove(job_id)
        log.info("job %s: %s reported", job_id, outcome.kind, extra={"job": job_id})
        return True

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        """Serve until stopped; 0 after a normal stop. Raises WorkerRefused."""
        keeper = threading.Thread(target=self._keep_alive, name="keeper", daemon=True)
        puller = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pull")
        try:
            self.recover()
            if not self._until_done("metadata report", self.report_metadata):
                return self._finish(puller)
            self.report_load()
            keeper.start()
            try:
                self._serve(puller)
            except WorkerRefused as refused:
                self.refused = refused
                self.stopping.set()
            return self._finish(puller)
        finally:
            self._done.set()
            puller.shutdown(wait=False, cancel_futures=True)

    def _serve(self, puller: ThreadPoolExecutor) -> None:
        taken = 0
        while not self.stopping.is_set():
            if self.options.max_jobs is not None and taken >= self.options.max_jobs:
                return
            if self._refresh_wanted and not self._until_done(
                "metadata report", self.report_metadata
            ):
                return
            if not self._resend_pending():
                self._backoff.wait()
                continue  # outcomes first: the server must not count this worker idle
            if not self._take_slot():
                return
            left = None if self.options.max_jobs is None else self.options.max_jobs - taken
            slots = 1 + self._take_free_slots(left)
            jobs = self._pull(puller, slots)
            for _ in range(slots - len(jobs)):
                self._free.release()
            for job in jobs:
                self._start(job)
            taken += len(jobs)

    def _take_slot(self) -> bool:
        while not self._free.acquire(timeout=0.2):
            if self.stopping.is_set():
                return False
        return True

    def _take_free_slots(self, left: int | None) -> int:
        """Besides the slot already taken, every other free one (at most ``left`` in
        all): a batch pull asks for a job for each."""
        if not self._batch_supported:
            return 0
        most = self.options.slots - 1 if left is None else min(self.options.slots, left) - 1
        taken = 0
        while taken < most and self._free.acquire(blocking=False):
            taken += 1
        return taken

    def _pull(self, puller: ThreadPoolExecutor, slots: int) -> list[Job]:
        """One pull for up to ``slots`` jobs, carrying the ends waiting to be reported,
        waiting in a helper thread so that a stop does not wait for the long-poll; the
        jobs it brings after the stop are given back at once."""
        asked = time.monotonic()
        with self._lock:
            if self.stopping.is_set():
                return []  # the ends stay for _finish to report
            # Only a batch pull carries ends (a single pull's agent reports each at once).
            ends, self._ends = (self._ends, {}) if self._batch_supported else ({}, self._ends)
            self._pulling = True
        self._abandoned_ends = ends
        try:
            if self._batch_supported:
                future = puller.submit(self._pull_batch, ends, slots)
            else:
                future = puller.submit(self._pull_single)
            while not future.done():
                if self.stopping.wait(0.1):
                    # The long-poll is not waited out: its connection is shut, the server
                    # takes no job for it, and the stop takes a moment, not --wait seconds.
                    self.client.cancel_waiting_pulls()
                    self._abandoned = future
                    return []
        finally:
            with self._lock:
                self._pulling = False
        try:
            jobs = future.result()
        except ApiError as error:
            if not _transient(error):
                raise _refusal(error) from None
            log.warning("pull failed: %s", error)
            self._backoff.wait()
            return []
        except ClientError as error:
            log.warning("pull failed: %s", error)
            self._backoff.wait()
            return []
        if not jobs and self.client.superseded:
            # This agent waits in one pull at a time: a newer pull under its name is
            # another agent's. Backed off, longer while it goes on (two agents under
            # one name would otherwise take each other's place as fast as they can).
            log.warning(
                "a newer pull of worker %s took this one's place: is another agent running "
                "with this name and token?",
                self.options.name,
            )
            self._backoff.wait()
            return []
        self._backoff.reset()
        if jobs and self.stopping.is_set():
            # The pull ended just as the stop came: its jobs are given back, not run.
            self._abandoned = future
            return []
        self._refresh_wanted = self._refresh_wanted or self.client.refresh_requested
        if not jobs and self._waited and time.monotonic() - asked < self.options.wait / 2:
            self.stopping.wait(self.options.poll_interval)  # the server does not long-poll
        return jobs

    def _pull_single(self) -> list[Job]:
        self._waited = True
        job = self.client.pull(wait=self.options.wait)
        return [job] if job is not None else []

    def _pull_batch(self, ends: dict[int, Outcome], slots: int) -> list[Job]:
        """The batch pull (in the pull thread): the ends it carries are acknowledged, or
        kept to be sent again when the answer did not come, or sent one by one when the
        server refused the batch (each then gets its own answer)."""
        reports = [
            EndReport(
                job_id,
                "finished" if outcome.kind == "finished" else "failed",
                reason=outcome.reason,
                exit_code=outcome.exit_code,
                output=printable(outcome.output),
            )
            for job_id, outcome in ends.items()
        ]
        try:
            # A pull that carries ends does not wait: its answer acknowledges them (the
            # spool forgets them then), and the express lane serves it; the next pull waits.
            self._waited = not reports
            wait = self.options.wait if self._waited else None
            answer = self.client.pull_batch(reports, max_jobs=slots, wait=wait)
        except ApiError as error:
            if error.status in (404, 405):
                log.warning("the server has no batch pull (%s); pulling one job at a time", error)
                self._batch_supported = False
                self._report_each(ends)
                return []
            if ends and not _transient(error) and not isinstance(error, Unauthorized):
                log.warning("the server refused a batch's reports (%s); sending each alone", error)
                self._report_each(ends)
                return []
            self._keep(ends)
            raise
        except ClientError:
            self._keep(ends)
            raise
        self._acknowledged(answer.finished)
        return answer.jobs

    def _keep(self, ends: dict[int, Outcome]) -> None:
        """Ends a batch could not deliver wait for the next one."""
        with self._lock:
            self._ends = {**ends, **self._ends}

    def _report_each(self, ends: dict[int, Outcome]) -> None:
        """Each end reported alone; those the server could not take are kept."""
        for job_id, outcome in ends.items():
            if not self._report(job_id, outcome):
                self._keep({job_id: outcome})

    def _acknowledged(self, finished: list[Ended]) -> None:
        for ended in finished:
            if ended.late:
                log.warning(
                    "the server recorded the end of job %s as late: %s",
                    ended.job_id,
                    ended.detail,
                    extra={"job": ended.job_id},
                )
            else:
                log.info("job %s: %s reported", ended.job_id, ended.state.value)
            if self.spool is not None:
                self.spool.remove(ended.job_id)

    def _hand_in(self, job_id: int, outcome: Outcome) -> None:
        """A job's end: carried by the next batch pull, or reported at once while a pull
        waits on the server (its wait would hold the report back), or the agent stops,
        or the server has no batch pull."""
        if outcome.kind in ("finished", "failed") and self._batch_supported:
            with self._lock:
                if not self._pulling and not self.stopping.is_set():
                    self._ends[job_id] = outcome
                    return
        self._report(job_id, outcome)

    def _give_back(self, future: Future[list[Job]]) -> None:
        jobs = [] if future.exception() is not None else future.result()
        for job in jobs:
            log.info("job %s came after the stop; giving it back", job.id)
            self._report(job.id, Outcome("returned", None, "", STOPPING))

    def _start(self, job: Job) -> None:
        if self.spool is not None:
            self.spool.write(SpoolEntry(job.id))
        thread = threading.Thread(target=self._run_job, args=(job,), name=f"job-{job.id}")
        with self._lock:
            self._running[job.id] = thread
        thread.start()

    def _run_job(self, job: Job) -> None:
        log.info("running job %s", job.id, extra={"job": job.id})
        try:
            outcome = self.run_job(job)
            if outcome.kind != "dropped":
                self._hand_in(job.id, outcome)
            elif self.spool is not None:
                self.spool.remove(job.id)
            log.info("job %s: %s", job.id, outcome.kind, extra={"job": job.id})
        except Exception:
            log.exception("job %s: the agent failed running it", job.id)
        finally:
            with self._lock:
                self._running.pop(job.id, None)
            self._free.release()

    def run_job(self, job: Job) -> Outcome:
        """Run the job's command and spool its outcome (before it is sent)."""
        options = RunOptions(
            worker=self.options.name,
            work_dir=self.options.work_dir,
            heartbeat_interval=self.options.heartbeat_interval,
            output_interval=self.options.output_interval,
            grace=self.options.grace,
        )

        def started(process: processes.JobProcess) -> None:
            if self.spool is not None:
                entry = SpoolEntry(job.id, process.pgid, process.started, processes.boot_id())
                self.spool.write(entry)

        run = JobRun(self.client, job, options, self.stopping, on_started=started)
        environment = job_environment(
            job, self.options.name, os.environ, self.options.pass_env, self.secret
        )
        outcome = run.execute(environment)
        if self.spool is not None and outcome.kind != "dropped":
            self.spool.write(SpoolEntry(job.id, outcome=asdict(outcome)))
        return outcome

    def _keep_alive(self) -> None:
        """Heartbeats while jobs run (they renew the jobs' lease) and load reports."""
        next_load = time.monotonic() + self.options.load_interval
        while not self._done.wait(self.options.heartbeat_interval):
            with self._lock:
                busy = bool(self._running)
            try:
                if busy:
                    beat = self.client.heartbeat()
                    self._refresh_wanted = self._refresh_wanted or beat.refresh_metadata
                if time.monotonic() >= next_load:
                    self.report_load()
                    next_load = time.monotonic() + self.options.load_interval
            except WorkerRefused as refused:
                self.refused = refused
                self.stopping.set()
            except ApiError as error:
                if not _transient(error):
                    self.refused = _refusal(error)
                    self.stopping.set()
                log.warning("heartbeat failed: %s", error)
            except ClientError as error:
                log.warning("heartbeat failed: %s", error)

    def _finish(self, puller: ThreadPoolExecutor) -> int:
        """Wait for the running jobs (each honours the grace period), then send what is
        left in the spool once; what cannot be sent waits for the next start."""
        while True:
            with self._lock:
                threads = list(self._running.values())
            if not threads:
                break
            for thread in threads:
                thread.join()
        pending = self._abandoned
        # Its job, if one comes, is given back while the client is still open.
        if pending is not None:
            if wait([pending], timeout=self.options.wait + 10).done:
                self._give_back(pending)  # its ends were acknowledged or kept
            else:
                self._keep(self._abandoned_ends)  # sent again: a resend is harmless
        with self._lock:
            ends, self._ends = self._ends, {}
        self._report_each(ends)
        self._resend_pending()
        if self.refused is not None:
            raise self.refused
        return 0
