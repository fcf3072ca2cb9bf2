"""The express lane: a worker's pull and its finish served without FastAPI's request
machinery, because they are most of what a busy farm sends (issue 23).

A pull and a finish through FastAPI pay for routing through every route, solving the
dependency graph, up to four thread-pool hops (the session dependency's enter and exit,
the endpoint, the response check) and the response model's validation; measured by
``bench/http_floor.py`` that was more of the server's CPU than the pull's and the
finish's SQL. This pure ASGI middleware sits inside the token gate (so the request id,
the body limits, authentication and rate limits apply as before) and answers the common
case of the two requests itself, with one hop to the thread pool for one transaction,
through the same functions the routes call (:func:`app.api.routes.workers.pull_once`,
:func:`app.api.routes.jobs.report_finish`):

* ``POST /v1/workers/{name}/pull`` without a query string (no long poll), by the
  worker's own token;
* ``POST /v1/jobs/{job_id}/finish`` by a worker token, with a JSON body that
  :class:`~app.api.schemas.jobs.FinishIn` accepts;
* ``POST /v1/jobs`` (issue 38) by a submitter's or an admin's token, without a query
  string or an Idempotency-Key, with a JSON body that :class:`~app.api.schemas.jobs.JobIn`
  accepts and that needs nothing but SQL (app/matching/submission/express.py), of a
  category that exists: on the event loop's connection only, in two statements.

Everything else goes to FastAPI, as does any request the lane cannot answer with a
success: a wrong token, a path parameter or body the route would refuse, an error of the
operation (its transaction is rolled back, so FastAPI runs it again from the start and
words the error, retries included). The lane therefore only ever answers what the route
would have answered; ``tests/api/test_express.py`` holds the two side by side, byte for
byte. A request the lane read the body of reaches FastAPI with that body replayed.

On PostgreSQL the express way runs on the event loop itself, on psycopg's asyncio
connection (app/db/event_loop.py): no hop to the thread pool and no SQLAlchemy connection
for the common case. The threads' way serves where that pool does not (no lifespan bound
it, a pooler stands in front), and whatever the loop's attempt could not do (it failed
before its COMMIT, or only the general way can decide: :class:`Threads`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from enum import Enum, auto
from typing import TypeVar

import anyio.to_thread
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import PRINCIPAL_SCOPE_KEY, Principal
from app.api.longpoll import PullOutcome
from app.api.raw_problems import send_problem
from app.api.routes.jobs import job_body, report_finish
from app.api.routes.workers import (
    PLACED_HEADER,
    REFRESH_HEADER,
    batch_once,
    pull_once,
    pull_outcome,
)
from app.api.schemas.common import MAX_ID
from app.api.schemas.jobs import (
    EndedOut,
    FinishedIn,
    FinishIn,
    JobIn,
    JobOut,
    PullBatchIn,
    PullBatchOut,
)
from app.db.base import utcnow
from app.db.dialect import COMMIT_OUTCOME_UNKNOWN, is_retryable_error
from app.db.engine import Database
from app.db.event_loop import CommitOutcomeUnknownError, EventLoopConnections
from app.db.models import Role
from app.db.retry import retry_reason
from app.matching.dispatch import express as express_dispatch
from app.matching.dispatch.batch import MAX_BATCH
from app.matching.errors import MatchingError
from app.matching.ordering import policy as ordering_policy
from app.matching.requests import JobSpec, ParsedRequest
from app.matching.submission import express as express_submission
from app.metrics import EXPRESS_REQUESTS, TRANSACTION_RETRIES
from app.settings import Settings

log = logging.getLogger("app.api")

#: The paths of the two requests; a name or id the pattern lets through is checked
#: further before the lane serves it.
_PULL_PATH = re.compile(r"/v1/workers/([^/]+)/pull")
_FINISH_PATH = re.compile(r"/v1/jobs/([1-9][0-9]{0,18})/finish")
_BATCH_PATH = re.compile(r"/v1/workers/([^/]+)/pull-batch")
#: The one query a batch pull the lane serves may have: how many jobs (no long poll).
_BATCH_QUERY = re.compile(rb"(?:max=([1-9][0-9]{0,3}))?")
#: The operation ids of the routes whose answers the lane gives.
PULL_OPERATION = "pull_job"
FINISH_OPERATION = "finish_job"
BATCH_OPERATION = "pull_batch"
SUBMIT_OPERATION = "submit_job"
#: The path of a single submission.
_SUBMIT_PATH = "/v1/jobs"
#: The JSON of a job's answer, as FastAPI writes a response model (by alias).
_JOB_JSON = TypeAdapter(JobOut)
_BATCH_JSON = TypeAdapter(PullBatchOut)
#: A request body the lane parses (a finish, a batch pull's reports, a job).
Parsed = TypeVar("Parsed", bound=BaseModel)


class ExpressLane:
    """Serves the common pull and finish (see the module docstring); passes the rest on."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Iterable[BaseRoute],
        database: Database,
        settings: Settings,
        loop_connections: EventLoopConnections | None = None,
    ) -> None:
        self.app = app
        self.database = database
        self.settings = settings
        #: PostgreSQL's connections for the event loop (app/db/event_loop.py), when the
        #: lifespan bound them: the express way then runs there, without a thread.
        self.loop_connections = loop_connections
        by_operation = {
            route.operation_id: route for route in routes if isinstance(route, APIRoute)
        }
        # The route objects go into the scope as the router would put them, so that the
        # access log and the latency metric name the same route either way.
        self.pull_route = by_operation[PULL_OPERATION]
        self.finish_route = by_operation[FINISH_OPERATION]
        self.batch_route = by_operation[BATCH_OPERATION]
        self.submit_route = by_operation[SUBMIT_OPERATION]
        #: PostgreSQL runs the common pull and finish without a Session
        #: (app/matching/dispatch/express.py); elsewhere the general way serves.
        self.express_sql = database.dialect_name == "postgresql"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not ordering_policy.active().is_default:
            # The express statements order by today's rules and make no share rows: under
            # another policy every request goes the general way (docs/ordering.md).
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == _SUBMIT_PATH and scope["method"] == "POST":
            submitter = _submitter_of(scope)
            if submitter is not None:
                replay = await self._submit(scope, receive, send, submitter)
                if replay is None:
                    EXPRESS_REQUESTS.labels("submit", "served").inc()
                    return
                EXPRESS_REQUESTS.labels("submit", "handed_over").inc()
                receive = replay
            await self.app(scope, receive, send)
            return
        worker = _worker_of(scope) if scope["type"] == "http" else None
        if worker is not None and scope["method"] == "POST":
            path = scope["path"]
            pulled = _PULL_PATH.fullmatch(path)
            if pulled is not None and pulled.group(1) == worker:
                if await self._pull(scope, send, worker):
                    EXPRESS_REQUESTS.labels("pull", "served").inc()
                    return
                EXPRESS_REQUESTS.labels("pull", "handed_over").inc()
            batched = _BATCH_PATH.fullmatch(path) if pulled is None else None
            if batched is not None and batched.group(1) == worker:
                replay = await self._batch(scope, receive, send, worker)
                if replay is None:
                    EXPRESS_REQUESTS.labels("batch", "served").inc()
                    return
                EXPRESS_REQUESTS.labels("batch", "handed_over").inc()
                receive = replay
            finished = _FINISH_PATH.fullmatch(path) if pulled is batched is None else None
            if finished is not None and int(finished.group(1)) <= MAX_ID:
                replay = await self._finish(scope, receive, send, worker, int(finished.group(1)))
                if replay is None:
                    EXPRESS_REQUESTS.labels("finish", "served").inc()
                    return
                EXPRESS_REQUESTS.labels("finish", "handed_over").inc()
                receive = replay
        await self.app(scope, receive, send)

    async def _pull(self, scope: Scope, send: Send, worker: str) -> bool:
        """Answer the pull; False (nothing sent, nothing kept) when FastAPI must."""
        if scope.get("query_string"):
            return False  # a long poll, or a query the route must check
        try:
            outcome = await self._pull_on_loop(worker)
            if not isinstance(outcome, PullOutcome):
                outcome = await anyio.to_thread.run_sync(
                    self._pull_once, worker, outcome is Threads.EXPRESS
                )
        except Exception as error:
            return await _answered_or_handed_over(scope, send, error)
        headers: list[tuple[bytes, bytes]] = []
        if outcome.refresh:
            headers.append((REFRESH_HEADER.lower().encode(), b"true"))
        scope["route"] = self.pull_route
        if outcome.job is None:
            await _respond(send, 204, b"", headers)
            return True
        if outcome.placed:
            headers.append((PLACED_HEADER.lower().encode(), b"true"))
        await _respond(send, 200, _JOB_JSON.dump_json(outcome.job, by_alias=True), headers)
        return True

    async def _finish(
        self, scope: Scope, receive: Receive, send: Send, worker: str, job_id: int
    ) -> Receive | None:
        """Answer the finish: None once answered, else the receive that gives FastAPI
        the body as the lane read it."""
        if _header(scope, b"content-type") != b"application/json":
            return receive  # the route checks other media types
        body, replay = await _read_body(receive)
        if body is None:
            return replay
        report = _parsed(FinishIn, body)
        if report is None:
            return replay  # the route words the 422
        try:
            answer = await self._finish_on_loop(worker, job_id, report)
            if not isinstance(answer, bytes):
                answer = await anyio.to_thread.run_sync(
                    self._finish_once, worker, job_id, report, answer is Threads.EXPRESS
                )
        except Exception as error:
            return None if await _answered_or_handed_over(scope, send, error) else replay
        scope["route"] = self.finish_route
        await _respond(send, 200, answer, [])
        return None

    async def _batch(
        self, scope: Scope, receive: Receive, send: Send, worker: str
    ) -> Receive | None:
        """Answer the batch pull: None once answered, else the receive that gives
        FastAPI the body as the lane read it (as :meth:`_finish`). Only the event loop's
        way serves it; where that pool is not, the route does."""
        query = _BATCH_QUERY.fullmatch(scope.get("query_string", b""))
        pool = self.loop_connections
        if query is None or pool is None or not pool.usable():
            return receive  # a long poll, a query the route checks, or no loop's way
        count = int(query.group(1) or 1)
        if count > MAX_BATCH:
            return receive
        media = _header(scope, b"content-type")
        body, replay = await _read_body(receive)
        if body is None:
            return replay
        if body == b"" and media is None:
            reports: list[FinishedIn] = []
        elif media != b"application/json":
            return replay  # the route checks other media types
        else:
            batch = _parsed(PullBatchIn, body)
            if batch is None:
                return replay  # the route words the 422
            reports = batch.finished
            if len({report.job_id for report in reports}) != len(reports):
                return replay  # a job reported twice: the route words the 422
        try:
            answer = await self._batch_on_loop(worker, reports, count)
        except Exception as error:
            return None if await _answered_or_handed_over(scope, send, error) else replay
        if answer is None:
            return replay
        outcome, ended, placed = answer
        headers: list[tuple[bytes, bytes]] = []
        if outcome.refresh:
            headers.append((REFRESH_HEADER.lower().encode(), b"true"))
        scope["route"] = self.batch_route
        out = PullBatchOut(finished=ended, jobs=outcome.job or [], placed=placed)
        await _respond(send, 200, _BATCH_JSON.dump_json(out, by_alias=True), headers)
        return None

    async def _submit(
        self, scope: Scope, receive: Receive, send: Send, submitter: str
    ) -> Receive | None:
        """Answer a plain submission (app/matching/submission/express.py) on the event
        loop's connection: None once answered, else the receive that gives FastAPI the
        body as the lane read it (as :meth:`_finish`). Only the event loop's way serves
        it; where that pool is not, the route does."""
        pool = self.loop_connections
        if scope.get("query_string") or pool is None or not pool.usable():
            return receive  # a query the route checks, or no loop's way
        if _header(scope, b"content-type") != b"application/json":
            return receive  # the route checks other media types
        if _header(scope, b"idempotency-key") is not None:
            return receive  # the route keeps the key with the job
        body, replay = await _read_body(receive)
        if body is None:
            return replay
        job_in = _parsed(JobIn, body)
        if job_in is None:
            return replay  # the route words the 422
        if job_in.tasks is not None or job_in.task_concurrency is not None:
            return replay  # the route refuses an array job
        spec = job_in.spec()
        request = express_submission.plain_request(spec)
        if request is None:
            return replay  # Grid Engine, a task, a jobspec, or an error to word
        try:
            answered = await self._submit_on_loop(spec, request, submitter)
        except Exception as error:
            return None if await _answered_or_handed_over(scope, send, error) else replay
        if answered is None:
            return replay  # a new category: rolled back, the route creates it
        job_id, answer = answered
        scope["route"] = self.submit_route
        await _respond(send, 201, answer, [(b"location", f"/v1/jobs/{job_id}".encode())])
        return None

    async def _submit_on_loop(
        self, spec: JobSpec, request: ParsedRequest, submitter: str
    ) -> tuple[int, bytes] | None:
        """The submission in a transaction of its own, its answer written before the
        commit; None (rolled back, nothing stored) when the general way must decide."""
        assert self.loop_connections is not None
        try:
            async with self.loop_connections.transaction() as transaction:
                submitted = await express_submission.submit_on_loop(
                    transaction, spec, request, submitter=submitter, now=utcnow()
                )
                if submitted is None:
                    raise _General
                answer = _JOB_JSON.dump_json(job_body(submitted.job, None), by_alias=True)
        except _General:
            return None
        express_submission.note_submission(submitted)
        return submitted.job.id, answer

    async def _batch_on_loop(
        self, worker: str, reports: list[FinishedIn], count: int
    ) -> tuple[PullOutcome[list[JobOut]], list[EndedOut], list[int]] | None:
        """The batch on the event loop's connection, in one transaction: every report
        ended the express way, then up to ``count`` express pulls. None (rolled back,
        nothing stored) when a report needs the general way: the route decides the whole
        batch. When the first pull needs the general way, the reports are committed and
        the general way pulls, in a thread; a later one ends the batch with the jobs it
        has (the worker's next request starts with the general way)."""
        assert self.loop_connections is not None
        started = time.perf_counter()
        try:
            async with self.loop_connections.transaction() as transaction:
                done = await express_dispatch.batch_on_loop(
                    transaction, worker, reports, count, utcnow()
                )
                if done is None:
                    raise _General
                jobs = [pulled.job for pulled in done.pulls if pulled.job is not None]
                bodies = [job_body(job, worker) for job in jobs]
        except (_General, express_dispatch.HandOver):
            return None  # rolled back
        for job, report in zip(done.ended, reports, strict=True):
            express_dispatch.note_finish(job, worker, report)
        for pulled in done.pulls:
            express_dispatch.note_pull(pulled, started)
        ended_out = [EndedOut(job_id=job.id, state=job.state, late=False) for job in done.ended]
        pulls, last = done.pulls, done.last
        if last is None and not pulls:
            # The reports are stored; the general way pulls (the first pull was not the
            # express way's to decide). Whatever that refuses, the route runs the whole
            # batch again and words it: the stored reports are resends to it then,
            # answered as the first.
            try:
                outcome, _, placed = await anyio.to_thread.run_sync(
                    batch_once, self.database, self.settings, worker, (), count
                )
            except MatchingError:
                return None
            return outcome, ended_out, placed
        puller = pulls[-1].puller if last is None else last.puller
        category = jobs[-1].category_id if jobs else None
        return pull_outcome(bodies or None, category, puller, self.settings), ended_out, []

    async def _pull_on_loop(self, worker: str) -> PullOutcome[JobOut] | Threads:
        """The express pull on the event loop's connection, in a transaction of its own;
        else which way the threads take (see :class:`Threads`). A COMMIT that failed is
        raised (:class:`~app.db.event_loop.CommitOutcomeUnknownError`)."""
        pool = self.loop_connections
        if pool is None or not pool.usable():
            return Threads.EXPRESS
        started = time.perf_counter()
        try:
            async with pool.transaction() as transaction:
                pulled = await express_dispatch.pull_on_loop(transaction, worker, utcnow())
                body = job_body(pulled.job, worker) if pulled and pulled.job else None
        except express_dispatch.HandOver:
            return Threads.GENERAL  # rolled back
        except CommitOutcomeUnknownError:
            raise
        except DBAPIError as error:
            return _before_commit(worker, error)
        if pulled is None:
            return Threads.GENERAL  # committed (the worker's last_seen): see express.py
        express_dispatch.note_pull(pulled, started)
        category = pulled.job.category_id if pulled.job is not None else None
        return pull_outcome(body, category, pulled.puller, self.settings)

    async def _finish_on_loop(self, worker: str, job_id: int, report: FinishIn) -> bytes | Threads:
        """The express finish on the event loop's connection, its answer written before
        the commit; else which way the threads take (as :meth:`_pull_on_loop`)."""
        pool = self.loop_connections
        if pool is None or not pool.usable():
            return Threads.EXPRESS
        try:
            async with pool.transaction() as transaction:
                job = await express_dispatch.finish_on_loop(
                    transaction, job_id, worker, report, utcnow()
                )
                answer = _JOB_JSON.dump_json(job_body(job, worker), by_alias=True) if job else b""
        except CommitOutcomeUnknownError:
            raise
        except DBAPIError as error:
            return _before_commit(worker, error)
        if job is None:
            return Threads.GENERAL
        express_dispatch.note_finish(job, worker, report)
        return answer

    def _pull_once(self, worker: str, express: bool = True) -> PullOutcome[JobOut]:
        """The pull: the express way on PostgreSQL (unless ``express`` is False: the event
        loop's attempt decided that the general way must), in a transaction of its own,
        and the general way in another when the express way cannot decide or elsewhere."""
        if self.express_sql and express:
            started = time.perf_counter()
            try:
                with self.database.core_transaction() as connection:
                    pulled = express_dispatch.pull(connection, worker, utcnow())
                    body = job_body(pulled.job, worker) if pulled and pulled.job else None
            except express_dispatch.HandOver:
                pulled = None  # rolled back
            if pulled is not None:
                express_dispatch.note_pull(pulled, started)
                category = pulled.job.category_id if pulled.job is not None else None
                return pull_outcome(body, category, pulled.puller, self.settings)
        return pull_once(self.database, self.settings, worker)

    def _finish_once(
        self, worker: str, job_id: int, report: FinishIn, express: bool = True
    ) -> bytes:
        """The finish, its answer written before the commit so that nothing that can
        fail comes after it: the express way on PostgreSQL (unless ``express`` is False,
        as for :meth:`_pull_once`), in a transaction of its own, and the general way in
        another when the express way cannot decide or elsewhere."""
        if self.express_sql and express:
            with self.database.core_transaction() as connection:
                job = express_dispatch.finish(connection, job_id, worker, report, utcnow())
                answer = _JOB_JSON.dump_json(job_body(job, worker), by_alias=True) if job else b""
            if job is not None:
                express_dispatch.note_finish(job, worker, report)
                return answer
        with self.database.transaction() as session:
            answer = _JOB_JSON.dump_json(
                report_finish(session, job_id, worker, report), by_alias=True
            )
        return answer


class Threads(Enum):
    """Where a request goes when the event loop did not answer it: the whole express
    way in a thread (the loop's way was not available, or its attempt failed before its
    COMMIT and stored nothing), or straight to the general way (the loop's express way
    decided that only the general way can)."""

    EXPRESS = auto()
    GENERAL = auto()


def _before_commit(worker: str, error: DBAPIError) -> Threads:
    """The event loop's attempt failed before its COMMIT and was rolled back: nothing was
    stored, and the threads' way runs it again, counted as a retry when the error is one
    (a deadlock, a lost connection: app/db/dialect.py)."""
    if is_retryable_error(error):
        reason = retry_reason(error)
        TRANSACTION_RETRIES.labels(reason=reason, outcome="retried").inc()
        log.info("express request of %s on the event loop: %s, running it again", worker, reason)
    else:
        log.warning("express request of %s on the event loop failed: %s", worker, error)
    return Threads.EXPRESS


async def _answered_or_handed_over(scope: Scope, send: Send, error: Exception) -> bool:
    """After the lane's attempt failed: True when the error was answered here (a COMMIT
    whose outcome nobody knows is not run again, as the route would not: 503), False when
    FastAPI must run the request again (nothing of the attempt was stored) and word it."""
    if getattr(error, COMMIT_OUTCOME_UNKNOWN, False) and not is_retryable_error(error):
        log.error("express %s: its commit failed: %s", scope["path"], error)
        await send_problem(
            scope, send, 503, "the database is unavailable", headers={"Retry-After": "5"}
        )
        return True
    if isinstance(error, DBAPIError) and is_retryable_error(error):
        # The request's transaction lost a race and runs again, in the route.
        reason = retry_reason(error)
        TRANSACTION_RETRIES.labels(reason=reason, outcome="retried").inc()
        log.info("%s %s: %s, running the transaction again", scope["method"], scope["path"], reason)
        return False
    log.debug("express %s handed to the route", scope["path"], exc_info=error)
    return False


class _General(Exception):
    """Raised inside the event loop's transaction to roll it back: only the general way
    can decide this request."""


def _parsed(model: type[Parsed], body: bytes) -> Parsed | None:
    """The JSON body as ``model``, or None when the route must word its 422."""
    try:
        return model.model_validate(json.loads(body))
    except (ValueError, ValidationError):
        return None


async def _read_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The request's body, read whole, and the receive that replays it to FastAPI; None
    for the body when the reading ended early (the client went away, or the body was
    too large or too slow: the route words it)."""
    # Chunks joined once at the end: a body sent a byte at a time costs linear time.
    chunks: list[bytes] = []
    try:
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None, _replay(b"".join(chunks), more=True, then=message)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
    except HTTPException as refused:  # too large or too slow: the route words it
        return None, _replay(b"".join(chunks), more=True, error=refused)
    body = b"".join(chunks)
    return body, _replay(body, more=False, then=None, receive=receive)


def _worker_of(scope: Scope) -> str | None:
    """The worker the token gate authenticated, None for any other caller."""
    principal = scope.get(PRINCIPAL_SCOPE_KEY)
    if isinstance(principal, Principal) and principal.role is Role.WORKER:
        return principal.subject
    return None


def _submitter_of(scope: Scope) -> str | None:
    """The submitter (or admin) the token gate authenticated, None for any other
    caller."""
    principal = scope.get(PRINCIPAL_SCOPE_KEY)
    if isinstance(principal, Principal) and principal.role in (Role.ADMIN, Role.SUBMITTER):
        return principal.subject
    return None


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _replay(
    body: bytes,
    *,
    more: bool,
    then: Message | None = None,
    error: HTTPException | None = None,
    receive: Receive | None = None,
) -> Receive:
    """A receive for FastAPI: the body the lane read, as one message (``more`` when the
    reading ended early), then what ended it (a disconnect message, or the body limit's
    error raised again), then the client's own receive (a disconnect while it runs)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]
    if then is not None:
        pending.append(then)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        if error is not None:
            raise error
        if receive is None:  # the client went away: it stays gone
            return {"type": "http.disconnect"}
        return await receive()

    return replayed


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """The answer as FastAPI sends a response model's: JSON with its length first; a 204
    has neither."""
    raw: list[tuple[bytes, bytes]] = []
    if status != 204:
        raw = [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
        ]
    await send({"type": "http.response.start", "status": status, "headers": raw + headers})
    await send({"type": "http.response.body", "body": body})
