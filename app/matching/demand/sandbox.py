"""Changes made to be looked at and undone: a savepoint rolled back, with what it asked
to announce or log after the commit forgotten, as a what-if does (app/matching/whatif/)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from app.matching import announce


@contextmanager
def rolled_back(session: Session) -> Iterator[None]:
    """Run the block in a savepoint and roll it back: nothing it did is stored, announced
    or logged. The session's objects are expired, so that nothing read inside is believed
    after."""
    saved = {key: copy.copy(value) for key, value in session.info.items()}
    with announce.withheld(session):
        savepoint = session.begin_nested()
        try:
            yield
        finally:
            savepoint.rollback()
            session.info.clear()
            session.info.update(saved)
            session.expire_all()
