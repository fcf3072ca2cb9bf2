"""Request rate limits per token: a token bucket for each token, in each server process.

Each token (an issued token by its id, the admin token as one) may make
``JOBMATCH_RATE_LIMIT_PER_SECOND`` requests a second on average, and up to
``JOBMATCH_RATE_LIMIT_BURST`` at once after a quiet spell; one more is answered 429
problem+json with ``Retry-After`` (the whole seconds until the bucket holds a request
again), by the token gate, before the body is read. Off (0) by default.

The buckets live in the process, without a round trip per request. So that the limit holds
for the whole server, each of the N processes of ``jobmatch serve --workers N`` keeps
1/N of it: 1/N of the rate, and 1/N of the burst (at least one request). A token never
gets more than the limit in all; a token whose requests all land in one process (one
keep-alive connection) gets that process's share only, 1/N of the limit. Set the limit
with that in mind, or count per connection at a proxy in front.

Long-poll pulls (``POST /v1/workers/{name}/pull?wait=...`` with a wait above 0) are not
counted unless ``JOBMATCH_RATE_LIMIT_LONG_POLL`` says so: a worker waiting for work is
already paced by its waits, and must not be refused the pull that hands it a job.
"""

from __future__ import annotations

import math
import re
from time import monotonic
from urllib.parse import parse_qsl

#: The route of a worker's pull (app/api/routes/workers.py).
_PULL_PATH = re.compile(r"^/v1/workers/[^/]+/pull$")


def is_long_poll_pull(method: str, path: str, query_string: bytes) -> bool:
    """Whether the request is a pull that may wait for work (``wait`` above 0)."""
    if method != "POST" or not _PULL_PATH.match(path):
        return False
    for name, value in parse_qsl(query_string.decode("latin-1")):
        if name == "wait":
            try:
                return float(value) > 0
            except ValueError:
                return False  # the route answers 422; counted like any request
    return False


class TokenBuckets:
    """A token bucket per key (module docstring). Used from the event loop only."""

    #: The most keys remembered; when full, the memory starts again with full buckets
    #: (far more than a farm's tokens: only a flood of distinct valid tokens gets there).
    LIMIT = 65_536

    def __init__(self, per_second: float, burst: int, *, processes: int = 1) -> None:
        """The limit of the whole server, of which this process keeps 1/``processes``."""
        self.processes = processes
        self.per_second = per_second / processes
        self.burst = max(1, burst // processes)
        #: key -> (requests the bucket holds, monotonic time it was filled to that).
        self._buckets: dict[str | int, tuple[float, float]] = {}

    def take(self, key: str | int) -> float:
        """Take one request from the key's bucket: 0 when there was one, else the seconds
        until there will be (nothing taken)."""
        now = monotonic()
        held, since = self._buckets.get(key, (float(self.burst), now))
        held = min(float(self.burst), held + (now - since) * self.per_second)
        if held >= 1:
            if len(self._buckets) >= self.LIMIT and key not in self._buckets:
                self._buckets.clear()
            self._buckets[key] = (held - 1, now)
            return 0.0
        self._buckets[key] = (held, now)
        return (1 - held) / self.per_second

    def refusal(self, wait: float) -> tuple[str, dict[str, str]]:
        """The 429's detail and headers for a request refused ``wait`` seconds early."""
        retry_after = max(1, math.ceil(wait))
        shared = (
            f", this server process's share of the {self.processes} processes' limit"
            if self.processes > 1
            else ""
        )
        detail = (
            f"too many requests with this token: at most {self.per_second:g} a second "
            f"(bursts of {self.burst}){shared}; retry after {retry_after} s"
        )
        return detail, {"Retry-After": str(retry_after)}
