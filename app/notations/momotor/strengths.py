"""Momotor match strengths and the NoMatch outcome (``momotor.shared.resources`` 2.1.3).

A match gives a strength, lower is better, from STRONGEST to WEAKEST, or raises
:class:`NoMatch`. Tag groups (:mod:`app.notations.momotor.groups`) and typed groups
(:mod:`app.notations.momotor.typed_groups`) both judge in these terms, so this leaf module
is what they share without importing each other.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["NEUTRAL", "STRONG", "STRONGEST", "WEAK", "WEAKEST", "NoMatch"]

#: Both sides require the tag: the best possible match.
STRONGEST: Final[float] = -math.inf
#: The task requires the tag, the worker offers it optionally.
STRONG: Final[float] = -1.0
#: Nothing matched, nothing was rejected.
NEUTRAL: Final[float] = 0.0
#: The worker requires the tag, the task only accepts it.
WEAK: Final[float] = 1.0
#: Both sides merely accept the tag: the worst possible match (Momotor quirk Q3).
WEAKEST: Final[float] = math.inf


class NoMatch(Exception):
    """The task and the worker cannot be matched (a required tag is missing or excluded)."""
