"""A coarse record of when each issued token was last used, that costs no write per request.

Each process remembers, per token, when it may next write the token's ``last_used_at``
(``JOBMATCH_TOKEN_LAST_USE_SECONDS`` after the last write, 5 minutes by default), and
writes only then: a token in use every second costs one short UPDATE per process every
five minutes. The recorded time is therefore the last use to within that interval (and
to within the number of processes that serve the token). A failed write is logged and
tried again at the token's next due use; it never fails the request.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy.exc import DBAPIError

from app.db.base import utcnow
from app.db.engine import Database
from app.db.tokens import record_use

log = logging.getLogger("app.api")


class TokenUseRecorder:
    """When each token's next use is worth writing down, and the write itself."""

    #: The most tokens remembered; when full, the memory starts again empty (the worst
    #: that does is one early write per token).
    LIMIT = 65_536

    def __init__(self, database: Database, interval_seconds: float) -> None:
        self.database = database
        self.interval = interval_seconds
        #: token hash -> monotonic time from which its next use is written. By hash, not
        #: by id: a row id can be given again (SQLite reuses the highest once its row is
        #: gone), and a new token must not inherit an old one's quiet interval.
        self._next_write: dict[str, float] = {}

    def due(self, token_hash: str) -> bool:
        """Whether this use should be written; if so, the next one is not for an interval.
        Called from the event loop only, so it needs no lock."""
        now = time.monotonic()
        next_write = self._next_write.get(token_hash)
        if next_write is not None and now < next_write:
            return False
        if len(self._next_write) >= self.LIMIT:
            self._next_write.clear()
        self._next_write[token_hash] = now + self.interval
        return True

    def record(self, token_id: int, token_hash: str) -> None:
        """Write the use (in a thread: it is a transaction)."""
        try:
            with self.database.transaction() as session:
                record_use(session, token_id, utcnow())
        except DBAPIError as error:
            self._next_write.pop(token_hash, None)
            log.warning("recording the use of token %s failed: %s", token_id, error.orig)
