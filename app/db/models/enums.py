"""Enumerations stored as short strings (portable: no native ENUM types)."""

from __future__ import annotations

import enum

from sqlalchemy import Enum

# The states travel in the API's JSON too: one definition for the server and the client.
from app.wire.states import JobState as JobState
from app.wire.states import WorkerState as WorkerState

#: Workers in these states run nothing: no candidates, and no help for a new job that only
#: they could run. A draining worker still counts; it gets work again once active. An
#: ``unknown`` one (silent past JOBMATCH_WORKER_TIMEOUT_SECONDS) counts as gone until it
#: speaks again (app/matching/liveness.py).
UNAVAILABLE_WORKER_STATES = (WorkerState.OFFLINE, WorkerState.DISABLED, WorkerState.UNKNOWN)


class TagMode(enum.StrEnum):
    """How a Momotor tag is written: ``x`` required, ``?x`` optional, ``~x`` excluded."""

    REQUIRED = "R"
    OPTIONAL = "O"
    EXCLUDED = "X"


def string_enum(enum_class: type[enum.StrEnum], name: str, length: int = 16) -> Enum:
    """A VARCHAR column holding the enum's values (not its member names)."""
    return Enum(
        enum_class,
        name=name,
        native_enum=False,
        length=length,
        validate_strings=True,
        values_callable=lambda members: [m.value for m in members],
    )
