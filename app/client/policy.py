"""Timeouts and the retry policy a client is built with.

Retries use stamina (exponential backoff with full jitter, capped, on top of tenacity): a
small, typed, well-kept library whose defaults are the ones a network client wants and which
switches to instant, counted retries in tests (``stamina.set_testing``). Which errors are
retried is decided per request by :func:`retry_wait`.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from app.client.errors import ServerUnreachable, ServiceUnavailable, TooManyRequests


@dataclass(frozen=True)
class Timeouts:
    """Seconds allowed to connect, to read the answer, to write the request and to wait for
    a pooled connection (httpx's four timeouts)."""

    connect: float = 5.0
    read: float = 30.0
    write: float = 30.0
    pool: float = 5.0

    def as_httpx(self) -> httpx2.Timeout:
        return httpx2.Timeout(
            connect=self.connect, read=self.read, write=self.write, pool=self.pool
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: at most ``attempts`` tries within ``timeout``
    seconds, waiting ``wait_initial`` then doubling up to ``wait_max``, plus up to
    ``wait_jitter`` seconds of random jitter. ``attempts=1`` turns retries off."""

    attempts: int = 5
    timeout: float = 60.0
    wait_initial: float = 0.1
    wait_max: float = 5.0
    wait_jitter: float = 1.0


NO_RETRIES = RetryPolicy(attempts=1)


def retry_wait(error: Exception, *, idempotent: bool, wait_max: float) -> bool | float:
    """Whether to send a request again after ``error``, or how many seconds to wait first.

    A connection that never reached the server is always safe to retry. A dropped connection,
    a timeout, a 503 or a 429 is retried only for a request that is safe to repeat (an
    idempotent method, a pure computation, or one carrying an Idempotency-Key), honouring the
    server's Retry-After (capped at ``wait_max``). Nothing else is retried: a 401 stays a 401.
    """
    if isinstance(error, ServerUnreachable):
        return idempotent or not error.sent
    if isinstance(error, ServiceUnavailable | TooManyRequests) and idempotent:
        if error.retry_after is not None:
            return min(error.retry_after, wait_max)
        return True
    return False
