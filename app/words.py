"""Counted nouns in messages people read: `1 slot`, `2 slots`, never `1 slots`.

Standard library only and nothing of app, so every layer may use it: the server's
messages (which the command line prints), the command line's own, the agent's.
"""

from __future__ import annotations


def noun(count: int, singular: str, plural: str | None = None) -> str:
    """``singular`` for a count of one, else ``plural`` (by default ``singular`` + s)."""
    if count == 1:
        return singular
    return plural if plural is not None else f"{singular}s"


def plural(count: int, singular: str, plural: str | None = None) -> str:
    """The count and its noun: ``plural(1, "slot")`` is `1 slot`, ``plural(3, "slot")``
    `3 slots`; ``plural(2, "body", "bodies")`` for a noun that does not take an s."""
    return f"{count} {noun(count, singular, plural)}"
