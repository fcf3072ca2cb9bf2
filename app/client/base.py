"""The part every role's client shares: one httpx connection pool, the bearer token,
timeouts, the retry policy, the user agent, and turning answers into models or typed errors.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx2
import stamina
import stamina.instrumentation

from app import __version__
from app.client import operations as ops
from app.client.errors import (
    ServerUnreachable,
    UnexpectedResponse,
    error_for_response,
)
from app.client.models import CompiledConstraint, ExpandedShape, Task, TaskPage, WorkerMetadata
from app.client.operations import Operation, covers
from app.client.parsing import ResponseShapeError, parse, to_json, without_none
from app.client.policy import RetryPolicy, Timeouts, retry_wait

T = TypeVar("T")

USER_AGENT = f"jobmatch-client/{__version__} httpx2/{httpx2.__version__}"
IDEMPOTENCY_KEY = "Idempotency-Key"


#: The request each thread is sending (method and path) and how many tries its policy
#: allows: what :func:`retry_line` names, since stamina's hooks see neither.
_sending = threading.local()


def retry_line(details: stamina.instrumentation.RetryDetails) -> str:
    """One line for a retry stamina scheduled (for a hook of
    ``stamina.instrumentation.set_on_retry_hooks``): what failed, why, which attempt
    comes next and when, e.g. ``POST /v1/workers/w1/heartbeat failed (cannot reach the
    jobmatch server at http://h:8000: [Errno 111] Connection refused); attempt 2 of 3 in
    0.4 s``."""
    request = getattr(_sending, "request", "a request")
    attempts = getattr(_sending, "attempts", None)
    of = f" of {attempts}" if attempts else ""
    return (
        f"{request} failed ({details.caused_by}); attempt {details.retry_num + 1}{of} "
        f"in {details.wait_for:.1f} s"
    )


class BaseClient:
    """A connection to one jobmatch server with one token; use it as a context manager (or
    call :meth:`close`) so the connection pool is released.

    The operations here need any valid token (or none): health, metrics, the Flux tools,
    task types and a worker's metadata. The role classes add theirs.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        user_agent: str | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        #: The decoded JSON of the last answer, exactly as the server sent it (before it
        #: became a model): what `jobmatch ... -o json` prints.
        self.last_json: Any = None
        headers = {"User-Agent": user_agent or USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = self._new_http(headers, timeouts, transport)

    def _new_http(
        self,
        headers: Mapping[str, str],
        timeouts: Timeouts | None,
        transport: httpx2.BaseTransport | None,
        limits: httpx2.Limits | None = None,
    ) -> httpx2.Client:
        """An httpx client to this server with these headers (a role may need a second
        one, with other limits: the worker's waiting pulls)."""
        return httpx2.Client(
            base_url=self.base_url,
            headers=dict(headers),
            timeout=(timeouts or Timeouts()).as_httpx(),
            transport=transport,
            follow_redirects=False,
            limits=limits or httpx2.Limits(),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- sending ---------------------------------------------------------------------------

    def _send(
        self,
        operation: Operation,
        *,
        path: Mapping[str, object] | None = None,
        query: Mapping[str, object | None] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        http: httpx2.Client | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> httpx2.Response:
        """Send ``operation`` and return its 2xx response, retrying as the policy allows;
        raise the typed error of any other answer. ``read_timeout`` replaces the client's
        for this request (a long-poll holds its answer back on purpose); ``http`` sends it
        through another httpx client than the usual one, ``extensions`` are httpx's."""
        url = operation.path.format(
            **{key: quote(str(value), safe="") for key, value in (path or {}).items()}
        )
        params = {key: value for key, value in (query or {}).items() if value is not None}
        safe = operation.idempotent or IDEMPOTENCY_KEY in (headers or {})
        json_body = to_json(body) if body is not None and not isinstance(body, dict) else body
        policy = self.retry

        def hook(error: Exception) -> bool | float:
            return retry_wait(error, idempotent=safe, wait_max=policy.wait_max)

        _sending.request = f"{operation.method} {url}"
        _sending.attempts = policy.attempts
        for attempt in stamina.retry_context(
            on=hook,
            attempts=policy.attempts,
            timeout=policy.timeout,
            wait_initial=policy.wait_initial,
            wait_max=policy.wait_max,
            wait_jitter=policy.wait_jitter,
        ):
            with attempt:
                response = self._once(
                    operation.method,
                    url,
                    params,
                    json_body,
                    headers,
                    read_timeout,
                    http=http,
                    extensions=extensions,
                )
        return response

    def _once(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any],
        json_body: Any,
        headers: Mapping[str, str] | None,
        read_timeout: float | None = None,
        *,
        http: httpx2.Client | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> httpx2.Response:
        sender = http or self._http
        timeout = sender.timeout
        if read_timeout is not None:
            timeout = httpx2.Timeout(
                connect=timeout.connect, read=read_timeout, write=timeout.write, pool=timeout.pool
            )
        try:
            response = sender.request(
                method,
                url,
                params=dict(params),
                json=json_body,
                headers=dict(headers or {}),
                timeout=timeout,
                extensions=dict(extensions or {}),
            )
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as error:
            raise ServerUnreachable(self.base_url, _reason(error), sent=False) from None
        except httpx2.TransportError as error:
            raise ServerUnreachable(self.base_url, _reason(error), sent=True) from None
        if response.is_success:
            return response
        raise error_for_response(response)

    def _call(self, model: type[T], operation: Operation, **request: Any) -> T:
        """Send ``operation`` and parse its JSON answer as ``model``."""
        return self._parse(model, self._send(operation, **request))

    def _page(
        self,
        model: type[T],
        operation: Operation,
        limit: int | None,
        offset: int | None,
        **filters: object,
    ) -> T:
        """One page of a list ``operation`` (parsed as ``model``); the server's page size
        and start where ``limit`` or ``offset`` is None, and a filter at None is not sent."""
        return self._call(model, operation, query={**filters, "limit": limit, "offset": offset})

    def _parse(self, model: type[T], response: httpx2.Response) -> T:
        where = f"{response.request.method} {response.url.path}"
        return self._parse_data(model, self._json(response), where)

    @staticmethod
    def _parse_data(model: type[T], data: Any, where: str) -> T:
        try:
            return parse(model, data)
        except ResponseShapeError as error:
            raise UnexpectedResponse(f"{where}: unexpected answer: {error}") from None

    def _json(self, response: httpx2.Response) -> Any:
        try:
            self.last_json = response.json()
        except ValueError:
            raise UnexpectedResponse(
                f"{response.request.method} {response.url.path}: answer is not JSON "
                f"(status {response.status_code}, {response.headers.get('content-type')})"
            ) from None
        return self.last_json

    @staticmethod
    def new_idempotency_key() -> str:
        """A fresh random key for a request that must take effect once however often it is
        sent."""
        return uuid.uuid4().hex

    # -- operations any caller may use -----------------------------------------------------

    @covers(ops.HEALTHZ)
    def health(self) -> dict[str, str]:
        """Liveness: the process answers (status and server version)."""
        data = self._json(self._send(ops.HEALTHZ))
        return {str(key): str(value) for key, value in dict(data).items()}

    @covers(ops.READYZ)
    def ready(self) -> dict[str, Any]:
        """Readiness: the database answers at the schema head (ServiceUnavailable if not)."""
        return dict(self._json(self._send(ops.READYZ)))

    @covers(ops.METRICS)
    def metrics(self) -> str:
        """The Prometheus text exposition of the server's metrics."""
        return self._send(ops.METRICS).text

    @covers(ops.EXPAND_SHAPE)
    def expand_shape(
        self, shape: str, *, default_label: str | None = None, format: str | None = None
    ) -> ExpandedShape:
        """Expand a Flux RFC 46 resource shape into an RFC 14 resources list."""
        body = {"shape": shape, "default_label": default_label, "format": format}
        return self._call(ExpandedShape, ops.EXPAND_SHAPE, body=without_none(body))

    @covers(ops.COMPILE_REQUIRES)
    def compile_requires(self, requires: str) -> CompiledConstraint:
        """Compile a Flux RFC 35 constraint query string into an RFC 31 constraint object."""
        return self._call(CompiledConstraint, ops.COMPILE_REQUIRES, body={"requires": requires})

    @covers(ops.VALIDATE_CONSTRAINT)
    def validate_constraint(self, constraint: Any) -> CompiledConstraint:
        """Validate a Flux RFC 31 constraint object; the canonical form comes back."""
        return self._call(
            CompiledConstraint, ops.VALIDATE_CONSTRAINT, body={"constraint": constraint}
        )

    @covers(ops.LIST_TASKS)
    def list_tasks(self, *, limit: int | None = None, offset: int | None = None) -> TaskPage:
        """The debusine task types registered on the server, a page at a time."""
        return self._page(TaskPage, ops.LIST_TASKS, limit, offset)

    @covers(ops.GET_TASK)
    def get_task(self, name: str) -> Task:
        return self._call(Task, ops.GET_TASK, path={"name": name})

    @covers(ops.GET_METADATA)
    def get_metadata(self, worker: str) -> WorkerMetadata:
        """A worker's metadata (a worker token may read only its own)."""
        return self._call(WorkerMetadata, ops.GET_METADATA, path={"name": worker})


def _reason(error: httpx2.TransportError) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, httpx2.TimeoutException):
        return f"timed out ({text})"
    return text
