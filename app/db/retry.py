"""When and how soon a unit of work that lost a race with another transaction runs again.

PostgreSQL aborts one of two deadlocked transactions (40P01) and, at REPEATABLE READ or
above, transactions that read a row another one changed (40001); SQLite gives up waiting for
the write lock with "database is locked". In each case nothing of the transaction was
stored and the documented remedy is to run it again from the start. The HTTP layer does so
(app/api/retries.py) instead of handing the client a 503 for what is a normal event under
load; this module holds the policy both sides agree on, free of HTTP.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.db.dialect import RETRYABLE_SQLSTATES, is_lost_connection, is_retryable_error

__all__ = ["RetryPolicy", "is_retryable_error", "retry_reason"]


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` runs of one unit of work, with jittered exponential backoff."""

    attempts: int = 5
    #: Upper bound of the first pause, in seconds; it doubles per retry up to ``max_delay``.
    base_delay: float = 0.01
    max_delay: float = 0.5

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Pause before retry number ``retry`` (1-based): "full jitter", uniform in
        [0, min(max_delay, base_delay * 2**(retry-1))], so that the transactions that
        collided do not collide again in lockstep."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** max(0, retry - 1))
        return (rng or random).uniform(0.0, ceiling)


def retry_reason(error: BaseException) -> str:
    """A short label for metrics and logs: deadlock, serialization, lost_connection or
    busy."""
    sqlstate = getattr(getattr(error, "orig", None), "sqlstate", None)
    if sqlstate == "40P01":
        return "deadlock"
    if sqlstate in RETRYABLE_SQLSTATES:
        return "serialization"
    if is_lost_connection(error):
        return "lost_connection"
    return "busy"
